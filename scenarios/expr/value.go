package expr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// exactDouble is the largest integer magnitude a float64 holds exactly (2^53).
const exactDouble = 1 << 53

// toCEL makes an input value a CEL value: a JSON map (string keys), list,
// string, bool or null, with every number a double (an integer past 2^53 an
// int, so that it stays exact). Values of other Go types go through
// encoding/json first. The whole tree is converted at once, which makes each
// access in the expression cheap (a lazily adapted []any costs a reflection
// call on every read).
func toCEL(x any) (ref.Val, error) {
	switch x := x.(type) {
	case nil:
		return types.NullValue, nil
	case bool:
		return types.Bool(x), nil
	case string:
		return types.String(x), nil
	case float64:
		return types.Double(x), nil
	case float32:
		return types.Double(x), nil
	case int, int8, int16, int32, int64:
		return fromInt(reflect.ValueOf(x).Int()), nil
	case uint8, uint16, uint32:
		return types.Double(reflect.ValueOf(x).Uint()), nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return fromInt(i), nil
		}
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %q: %w", x, err)
		}
		return types.Double(f), nil
	case map[string]any:
		out := make(map[ref.Val]ref.Val, len(x))
		for k, v := range x {
			cv, err := toCEL(v)
			if err != nil {
				return nil, err
			}
			out[types.String(k)] = cv
		}
		return types.NewRefValMap(types.DefaultTypeAdapter, out), nil
	case []any:
		out := make([]ref.Val, len(x))
		for i, v := range x {
			cv, err := toCEL(v)
			if err != nil {
				return nil, err
			}
			out[i] = cv
		}
		return types.NewRefValList(types.DefaultTypeAdapter, out), nil
	}
	data, err := json.Marshal(x)
	if err != nil {
		return nil, fmt.Errorf("a %T is not JSON: %w", x, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("a %T is not JSON: %w", x, err)
	}
	return toCEL(v)
}

// fromInt is an integer as CEL sees a JSON number: a double, unless a double
// cannot hold it exactly.
func fromInt(i int64) ref.Val {
	if i >= -exactDouble && i <= exactDouble {
		return types.Double(i)
	}
	return types.Int(i)
}

// toJSON converts an expression's result into plain JSON values; path says
// where in the result a value is, for errors (".kvs[0].key").
func toJSON(v ref.Val, path string) (any, error) {
	switch v := v.(type) {
	case types.Null:
		return nil, nil
	case types.Bool:
		return bool(v), nil
	case types.String:
		return string(v), nil
	case types.Double:
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%sgot %v, which JSON cannot carry", at(path), f)
		}
		return f, nil
	case types.Int:
		if v < -exactDouble || v > exactDouble {
			return nil, fmt.Errorf("%sgot the integer %d, past what a JSON number holds exactly (2^53; string() makes it text)", at(path), int64(v))
		}
		return float64(v), nil
	case types.Uint:
		if v > exactDouble {
			return nil, fmt.Errorf("%sgot the integer %d, past what a JSON number holds exactly (2^53; string() makes it text)", at(path), uint64(v))
		}
		return float64(v), nil
	case types.Bytes:
		return nil, fmt.Errorf("%sgot bytes (base64.encode() or string() makes them text)", at(path))
	case traits.Mapper:
		out := map[string]any{}
		for it := v.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return nil, fmt.Errorf("%sgot a map with %s key, %v; JSON keys are strings", at(path), describeVal(k), k)
			}
			item, err := toJSON(v.Get(k), path+"."+string(ks))
			if err != nil {
				return nil, err
			}
			out[string(ks)] = item
		}
		return out, nil
	case traits.Lister:
		n, ok := v.Size().(types.Int)
		if !ok {
			return nil, fmt.Errorf("%sgot a list of unknown size", at(path))
		}
		out := make([]any, 0, int(n))
		for i := types.Int(0); i < n; i++ {
			item, err := toJSON(v.Get(i), path+"["+strconv.Itoa(int(i))+"]")
			if err != nil {
				return nil, err
			}
			out = append(out, item)
		}
		return out, nil
	case *types.Err:
		return nil, fmt.Errorf("%s%v", at(path), v)
	}
	return nil, fmt.Errorf("%sgot %s", at(path), describeVal(v))
}

// at prefixes a message with where in a result its value is.
func at(path string) string {
	if path == "" {
		return ""
	}
	return "at " + path + ": "
}

// describeVal names a CEL value's type with an article: "a timestamp".
func describeVal(v ref.Val) string {
	if t, ok := v.Type().(*types.Type); ok {
		return describeType(t)
	}
	return article(v.Type().TypeName())
}

// describeJSON names a converted result's type as messages do.
func describeJSON(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a bool"
	case string:
		return "a string"
	case float64:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "a map"
	}
	return fmt.Sprintf("a %T", v)
}

// marshal writes a converted result as JSON, keeping <, > and & as they are.
func marshal(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
