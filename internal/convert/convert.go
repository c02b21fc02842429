// Package convert turns the typed objects the builders make (Kubernetes',
// provider-aws', provider-kubernetes' and Flux's Go types) into composed
// resources: exactly what the SDK's composed.From returns, without its JSON
// round trip.
//
// composed.From (function-sdk-go v0.6.1, resource/composed/composed.go)
// encodes the object with github.com/go-json-experiment/json (v2 semantics,
// chosen there because v2's omitempty leaves out empty structs), decodes
// that JSON into a map, then deletes metadata.generation, and metadata if
// that leaves it empty. A composed call converted some forty objects that
// way, the access check's Pod and its script among them: a tenth of the
// function's CPU. Composed walks the Go value instead, by the rules that
// encoder applies (the version function-sdk-go requires,
// v0.0.0-20240815175050-ebd3a8989ca1: fields.go, arshal_default.go):
//
//   - a field's name is its json tag's, or its Go name; a "-" tag and
//     unexported fields are left out; an embedded struct without a name, or
//     one tagged inline, has its fields inlined;
//   - omitzero leaves a field out when it is its type's zero value, or its
//     IsZero method says so; omitempty when it would encode as null, "", {}
//     or [] (not false or 0: v2 keeps them);
//   - a nil slice is [], a nil map {}, a nil pointer null; numbers are
//     float64, as JSON decodes into an interface;
//   - a value whose type (or pointer type) encodes itself (metav1.Time,
//     resource.Quantity, intstr.IntOrString, …), an interface, a byte slice,
//     an array, a map not keyed by plain strings, a float32: encoded and
//     decoded by that same package, alone.
//
// A type with anything else in it (a string or format option, a field name
// two inlined structs share, an inlined pointer or map, an unexported
// embedded type), and a value the encoder refuses (a string that is not
// UTF-8, a NaN), is converted by composed.From, whole, which also words its
// errors. The tests hold Composed to composed.From on randomly filled
// objects of every type the builders make.
package convert

import (
	"encoding"
	"errors"
	"math"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/go-json-experiment/json"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Composed is composed.From(o).
func Composed(o runtime.Object) (*composed.Unstructured, error) {
	if _, ok := o.(interface{ UnstructuredContent() map[string]any }); ok {
		return composed.From(o) // no round trip there either
	}
	v := reflect.ValueOf(o)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct || !planOf(v.Elem().Type()).walkable {
		return composed.From(o)
	}
	gvks, _, err := composed.Scheme.ObjectKinds(o)
	if err != nil {
		return composed.From(o) // its error, in its words
	}
	for _, gvk := range gvks {
		o.GetObjectKind().SetGroupVersionKind(gvk)
	}
	obj, err := structOf(v.Elem())
	if err != nil {
		return composed.From(o)
	}
	if m, ok := obj["metadata"].(map[string]any); ok {
		delete(m, "generation")
		if len(m) == 0 {
			delete(obj, "metadata")
		}
	}
	return &composed.Unstructured{Unstructured: unstructured.Unstructured{Object: obj}}, nil
}

// errRefused: a value the encoder would refuse.
var errRefused = errors.New("refused by the encoder")

// A field of a struct, as the encoder names it.
type field struct {
	name      string
	index     []int
	omitEmpty bool
	omitZero  bool
	isZero    func(reflect.Value) bool // omitzero's test, for an omitzero field
}

// A type's plan: how its values are walked.
type plan struct {
	// alone: encoded and decoded by the encoder, by itself.
	alone bool
	// walkable: nothing in the type needs composed.From.
	walkable bool
	fields   []field
}

var plans sync.Map // reflect.Type → *plan

var (
	jsonMarshaler   = reflect.TypeFor[json.MarshalerV1]()
	jsonMarshalerV2 = reflect.TypeFor[json.MarshalerV2]()
	textMarshaler   = reflect.TypeFor[encoding.TextMarshaler]()
	isZeroer        = reflect.TypeFor[interface{ IsZero() bool }]()
)

func encodesItself(t reflect.Type) bool {
	for _, i := range []reflect.Type{jsonMarshalerV2, jsonMarshaler, textMarshaler} {
		if t.Implements(i) || reflect.PointerTo(t).Implements(i) {
			return true
		}
	}
	return false
}

// planOf is t's plan, made once.
func planOf(t reflect.Type) *plan {
	if p, ok := plans.Load(t); ok {
		return p.(*plan)
	}
	walkable(t, map[reflect.Type]bool{})
	p, _ := plans.Load(t)
	return p.(*plan)
}

func makePlan(t reflect.Type, visiting map[reflect.Type]bool) *plan {
	if encodesItself(t) {
		return &plan{alone: true, walkable: true}
	}
	switch t.Kind() {
	case reflect.Bool, reflect.String, reflect.Float64,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return &plan{walkable: true}
	case reflect.Float32, reflect.Interface, reflect.Array:
		return &plan{alone: true, walkable: true}
	case reflect.Pointer:
		return &plan{walkable: walkable(t.Elem(), visiting)}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return &plan{alone: true, walkable: true}
		}
		return &plan{walkable: walkable(t.Elem(), visiting)}
	case reflect.Map:
		if t.Key().Kind() != reflect.String || encodesItself(t.Key()) {
			return &plan{alone: true, walkable: true}
		}
		return &plan{walkable: walkable(t.Elem(), visiting)}
	case reflect.Struct:
		fields, ok := structFields(t, visiting)
		return &plan{walkable: ok, fields: fields}
	}
	return &plan{walkable: false} // channels, functions, complex numbers: refused
}

// walkable says whether t can be walked, making its plan if need be.
func walkable(t reflect.Type, visiting map[reflect.Type]bool) bool {
	if visiting[t] {
		return true // a recursive type: judged where it started
	}
	if p, ok := plans.Load(t); ok {
		return p.(*plan).walkable
	}
	visiting[t] = true
	p := makePlan(t, visiting)
	delete(visiting, t)
	plans.Store(t, p)
	return p.walkable
}

// structFields are the fields a struct encodes to, inlined ones flattened,
// or false if the type holds anything Composed leaves to composed.From.
func structFields(t reflect.Type, visiting map[reflect.Type]bool) ([]field, bool) {
	var out []field
	names := map[string]bool{}
	var walk func(t reflect.Type, index []int) bool
	walk = func(t reflect.Type, index []int) bool {
		tagged, exported := false, false
		for i := range t.NumField() {
			sf := t.Field(i)
			tag, hasTag := sf.Tag.Lookup("json")
			tagged = tagged || hasTag
			if tag == "-" {
				continue
			}
			if !sf.IsExported() {
				if sf.Anonymous || hasTag {
					return false // the encoder refuses both
				}
				continue
			}
			exported = true
			name, opts, _ := strings.Cut(tag, ",")
			f := field{name: name, index: append(append([]int(nil), index...), i)}
			if strings.HasPrefix(name, "'") {
				return false // a quoted name
			}
			inline := sf.Anonymous && name == ""
			for o := range strings.SplitSeq(opts, ",") {
				switch o {
				case "":
				case "omitempty":
					f.omitEmpty = true
				case "omitzero":
					f.omitZero = true
				case "inline":
					inline = true
				case "nocase", "strictcase": // decoding only
				default:
					return false // string, format, unknown
				}
			}
			if inline {
				if sf.Type.Kind() != reflect.Struct || encodesItself(sf.Type) || f.omitEmpty || f.omitZero || name != "" && !sf.Anonymous {
					return false
				}
				if !walk(sf.Type, f.index) {
					return false
				}
				continue
			}
			if f.name == "" {
				f.name = sf.Name
			}
			if names[f.name] || !utf8.ValidString(f.name) {
				return false // which one the encoder keeps is not worth copying
			}
			names[f.name] = true
			if f.omitZero {
				f.isZero = zeroTest(sf.Type)
			}
			if !walkable(sf.Type, visiting) {
				return false
			}
			out = append(out, f)
		}
		return t.NumField() == 0 || tagged || exported // the encoder refuses a struct of unexported fields alone
	}
	ok := walk(t, nil)
	return out, ok
}

// zeroTest is how omitzero judges a value of t.
func zeroTest(t reflect.Type) func(reflect.Value) bool {
	switch {
	case t.Kind() == reflect.Interface && t.Implements(isZeroer):
		return func(v reflect.Value) bool {
			return v.IsNil() || v.Elem().Kind() == reflect.Pointer && v.Elem().IsNil() || v.Interface().(interface{ IsZero() bool }).IsZero()
		}
	case t.Kind() == reflect.Pointer && t.Implements(isZeroer):
		return func(v reflect.Value) bool { return v.IsNil() || v.Interface().(interface{ IsZero() bool }).IsZero() }
	case t.Implements(isZeroer):
		return func(v reflect.Value) bool { return v.Interface().(interface{ IsZero() bool }).IsZero() }
	case reflect.PointerTo(t).Implements(isZeroer):
		return func(v reflect.Value) bool { return v.Addr().Interface().(interface{ IsZero() bool }).IsZero() }
	}
	return func(v reflect.Value) bool { return v.IsZero() }
}

// structOf is a struct's encoding, as a map. v is addressable.
func structOf(v reflect.Value) (map[string]any, error) {
	p := planOf(v.Type())
	m := make(map[string]any, len(p.fields))
	for _, f := range p.fields {
		fv := v.FieldByIndex(f.index)
		if f.omitZero && f.isZero(fv) {
			continue
		}
		e, err := valueOf(fv)
		if err != nil {
			return nil, err
		}
		if f.omitEmpty && empty(e) {
			continue
		}
		m[f.name] = e
	}
	return m, nil
}

// empty: the value encodes as null, "", {} or [].
func empty(e any) bool {
	switch e := e.(type) {
	case nil:
		return true
	case string:
		return e == ""
	case map[string]any:
		return len(e) == 0
	case []any:
		return len(e) == 0
	}
	return false
}

// valueOf is a value's encoding, decoded into an interface.
func valueOf(v reflect.Value) (any, error) {
	p := planOf(v.Type())
	if !p.walkable {
		return nil, errRefused // a recursive type judged walkable where it recurs
	}
	if p.alone {
		return alone(v)
	}
	switch v.Kind() {
	case reflect.Bool:
		return v.Bool(), nil
	case reflect.String:
		s := v.String()
		if !utf8.ValidString(s) {
			return nil, errRefused
		}
		return s, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(v.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return float64(v.Uint()), nil
	case reflect.Float64:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, errRefused
		}
		return f, nil
	case reflect.Pointer:
		if v.IsNil() {
			return nil, nil
		}
		return valueOf(v.Elem())
	case reflect.Slice:
		out := make([]any, v.Len())
		for i := range out {
			e, err := valueOf(v.Index(i))
			if err != nil {
				return nil, err
			}
			out[i] = e
		}
		return out, nil
	case reflect.Map:
		out := make(map[string]any, v.Len())
		it := v.MapRange()
		for it.Next() {
			k := it.Key().String()
			if !utf8.ValidString(k) {
				return nil, errRefused
			}
			// A map's value is not addressable: copied, as the encoder
			// copies it, so methods on its pointer apply.
			e := reflect.New(it.Value().Type()).Elem()
			e.Set(it.Value())
			ev, err := valueOf(e)
			if err != nil {
				return nil, err
			}
			out[k] = ev
		}
		return out, nil
	case reflect.Struct:
		if !v.CanAddr() {
			c := reflect.New(v.Type()).Elem()
			c.Set(v)
			v = c
		}
		return structOf(v)
	}
	return nil, errRefused
}

// alone is a value encoded by the encoder and decoded into an interface,
// as composed.From does with the whole object.
func alone(v reflect.Value) (any, error) {
	x := v.Interface()
	if v.CanAddr() {
		x = v.Addr().Interface() // so methods on its pointer apply, as they do when the encoder walks the object
	}
	b, err := json.Marshal(x)
	if err != nil {
		return nil, errRefused
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, errRefused
	}
	return out, nil
}

// Walked says whether Composed walks objects of type t (a struct type)
// itself, rather than leaving them to composed.From.
func Walked(t reflect.Type) bool { return planOf(t).walkable }
