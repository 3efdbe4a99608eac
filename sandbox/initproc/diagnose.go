package initproc

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"syscall"
)

// whyNot explains why the agent at path (argv[0] as given: name) could not
// be started with err, in terms of what to change in the image: a
// directory, a file without the execute bit, a script whose #! interpreter
// is missing, a dynamically linked binary whose loader is missing, a
// binary for another architecture, or a file in no executable format.
func whyNot(name, path string, err error) string {
	fi, statErr := os.Stat(path)
	switch {
	case statErr != nil && errors.Is(statErr, os.ErrNotExist):
		return fmt.Sprintf("%q does not exist in the image", name)
	case statErr != nil:
		return fmt.Sprintf("%q: %v", name, statErr)
	case fi.IsDir():
		return fmt.Sprintf("%q is a directory, not a program", name)
	}
	head := readHead(path)
	if errors.Is(err, syscall.EACCES) {
		if fi.Mode().Perm()&0o111 == 0 {
			hint := "chmod +x it when you build the image"
			if interp, ok := shebang(head); ok {
				hint += fmt.Sprintf(", or run it through its interpreter (command: [%s, %s])", interp[0], name)
			}
			return fmt.Sprintf("%q is not executable (mode %v): %s", name, fi.Mode().Perm(), hint)
		}
		return fmt.Sprintf("%q: permission denied for uid %d (mode %v; the sandbox runs as 65534:65534, so the file and its directories must be readable and executable by others)", name, os.Getuid(), fi.Mode().Perm())
	}
	if interp, ok := shebang(head); ok {
		if line, _, _ := bytes.Cut(head, []byte("\n")); bytes.HasSuffix(line, []byte("\r")) {
			// The kernel looks for an interpreter whose name ends in \r.
			return fmt.Sprintf("%q has Windows line endings (CRLF): its #! line names %q, which is not in the image; convert the script to LF line endings (dos2unix) when you build the image", name, strings.TrimLeft(string(line[2:]), " \t"))
		}
		if _, serr := os.Stat(interp[0]); serr != nil {
			return fmt.Sprintf("%q is a script for %s (its #! line), which is not in the image: install it, or fix the #! line", name, interp[0])
		}
		return fmt.Sprintf("%q is a script for %s: %v", name, interp[0], err)
	}
	if bytes.HasPrefix(head, []byte("\x7fELF")) {
		return whyNotELF(name, path, err)
	}
	if errors.Is(err, syscall.ENOEXEC) {
		return fmt.Sprintf("%q is in no executable format (%s): a script needs a #! line naming its interpreter", name, describeHead(head))
	}
	return fmt.Sprintf("%q: %v", name, err)
}

// whyNotELF explains an ELF file that would not start.
func whyNotELF(name, path string, err error) string {
	f, ferr := elf.Open(path)
	if ferr != nil {
		return fmt.Sprintf("%q is a damaged ELF file: %v", name, ferr)
	}
	defer f.Close()
	if want := goarchMachine(); want != elf.EM_NONE && f.Machine != want {
		return fmt.Sprintf("%q is a binary for %s, but this sandbox runs linux/%s: build it for linux/%s", name, machineName(f.Machine), runtime.GOARCH, runtime.GOARCH)
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b, _ := io.ReadAll(p.Open())
		loader := strings.TrimRight(string(b), "\x00")
		if _, serr := os.Stat(loader); serr != nil {
			return fmt.Sprintf("%q is dynamically linked, and its loader %s is not in the image: build it static (for Go, CGO_ENABLED=0), or use an image with the libc it was built against", name, loader)
		}
	}
	return fmt.Sprintf("%q: %v", name, err)
}

// readHead reads the first bytes of a file, enough for a #! line or an
// ELF magic.
func readHead(path string) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	b := make([]byte, 256)
	n, _ := io.ReadFull(f, b)
	return b[:n]
}

// shebang parses a #! line into the interpreter and its argument.
func shebang(head []byte) ([]string, bool) {
	if !bytes.HasPrefix(head, []byte("#!")) {
		return nil, false
	}
	line, _, _ := bytes.Cut(head[2:], []byte("\n"))
	fields := strings.Fields(string(line))
	if len(fields) == 0 {
		return nil, false
	}
	return fields, true
}

func describeHead(head []byte) string {
	if len(head) == 0 {
		return "it is empty"
	}
	n := min(len(head), 16)
	return fmt.Sprintf("it starts with %q", head[:n])
}

func goarchMachine() elf.Machine {
	switch runtime.GOARCH {
	case "amd64":
		return elf.EM_X86_64
	case "arm64":
		return elf.EM_AARCH64
	case "386":
		return elf.EM_386
	case "arm":
		return elf.EM_ARM
	}
	return elf.EM_NONE
}

func machineName(m elf.Machine) string {
	switch m {
	case elf.EM_X86_64:
		return "amd64"
	case elf.EM_AARCH64:
		return "arm64"
	case elf.EM_386:
		return "386"
	case elf.EM_ARM:
		return "arm"
	case elf.EM_RISCV:
		return "riscv64"
	}
	return strings.TrimPrefix(m.String(), "EM_")
}
