package harness_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/harnesstest"
)

const module = "github.com/overnight-dev/overnight/"

// readLayers parses the README's "### Layers" table: package -> layer.
func readLayers() map[string]int {
	f, err := os.Open(filepath.Join(harnesstest.ModuleRoot(), "README.md"))
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	layers := map[string]int{}
	in := false
	row := regexp.MustCompile(`^\| ([0-9]+) \| (.*) \|$`)
	pkg := regexp.MustCompile("`([^`]+)`")
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "### Layers":
			in = true
		case in && strings.HasPrefix(line, "#"):
			in = false
		case in:
			m := row.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			n, _ := strconv.Atoi(m[1])
			for _, p := range pkg.FindAllStringSubmatch(m[2], -1) {
				layers[p[1]] = n
			}
		}
	}
	Expect(sc.Err()).NotTo(HaveOccurred())
	return layers
}

var _ = Describe("the package layers", func() {
	It("has every import point down the layers the README writes down", func() {
		layers := readLayers()
		Expect(layers).To(HaveKey("harness"), "the README has no layer table")
		cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
		cmd.Dir = harnesstest.ModuleRoot()
		out, err := cmd.Output()
		Expect(err).NotTo(HaveOccurred())
		var bad []string
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			fields := strings.Fields(line)
			self := strings.TrimPrefix(fields[0], module)
			mine, ok := layers[self]
			if !ok {
				bad = append(bad, self+" is in no layer of the README's table")
				continue
			}
			for _, imp := range fields[1:] {
				dep, ours := strings.CutPrefix(imp, module)
				if !ours {
					continue
				}
				if theirs, ok := layers[dep]; !ok || theirs >= mine {
					bad = append(bad, self+" (layer "+strconv.Itoa(mine)+") imports "+dep+" (layer "+strconv.Itoa(theirs)+")")
				}
			}
		}
		Expect(bad).To(BeEmpty())
	})
})
