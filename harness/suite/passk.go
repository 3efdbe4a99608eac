package suite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strconv"
)

// PassHatK is tau-bench's unbiased estimator of pass^k for a task tried n
// times with c passes: C(c,k)/C(n,k), the chance that k trials drawn
// without replacement all pass. It is exact (a rational); k must be in
// 1..n.
func PassHatK(n, c, k int) *big.Rat {
	// C(c,k)/C(n,k) = prod_{i<k} (c-i)/(n-i)
	r := big.NewRat(1, 1)
	for i := 0; i < k; i++ {
		if c-i <= 0 {
			return new(big.Rat)
		}
		r.Mul(r, big.NewRat(int64(c-i), int64(n-i)))
	}
	return r
}

// PassAtK is the unbiased estimator of pass@k: 1 - C(n-c,k)/C(n,k), the
// chance that at least one of k trials drawn without replacement passes.
func PassAtK(n, c, k int) *big.Rat {
	return new(big.Rat).Sub(big.NewRat(1, 1), PassHatK(n, n-c, k))
}

// KValues are metric values for k = 1, 2, …: KValues[k-1] is the value at
// k. In JSON it is an object keyed by k in numeric order, {"1": 0.9, "2": …}.
type KValues []float64

// At returns the value at k, and whether there is one.
func (v KValues) At(k int) (float64, bool) {
	if k < 1 || k > len(v) {
		return 0, false
	}
	return v[k-1], true
}

// MarshalJSON writes {"1": v1, "2": v2, …}.
func (v KValues) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, x := range v {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:", strconv.Itoa(i+1))
		js, err := json.Marshal(x)
		if err != nil {
			return nil, err
		}
		b.Write(js)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads what MarshalJSON writes; the keys must be 1..n.
func (v *KValues) UnmarshalJSON(data []byte) error {
	var m map[string]float64
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	ks := make([]int, 0, len(m))
	for key := range m {
		k, err := strconv.Atoi(key)
		if err != nil || k < 1 {
			return fmt.Errorf("k %q: want 1, 2, …", key)
		}
		ks = append(ks, k)
	}
	sort.Ints(ks)
	out := make(KValues, len(ks))
	for i, k := range ks {
		if k != i+1 {
			return fmt.Errorf("k values skip %d", i+1)
		}
		out[i] = m[strconv.Itoa(k)]
	}
	*v = out
	return nil
}

// ratFloat is r as the nearest float64.
func ratFloat(r *big.Rat) float64 {
	f, _ := r.Float64()
	return f
}
