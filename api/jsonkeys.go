package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
)

// encoding/json matches a key to a field case-insensitively and lets the last of a repeated key
// win, so {"amount":5,"AMOUNT":5000} decodes as 5000 while a proxy, a log or an audit that reads
// the first "amount" sees 5. Two readers of one body must never disagree about money, so every
// body's keys are checked before it is decoded: each must be a field's name, spelt exactly, and
// appear once.

// objectKeys lists the keys of the top level of a JSON object, in order and with escapes
// resolved (as the decoder reads them). ok is false when data is not one object this scan can
// read; the decoder then says what is wrong with it.
func objectKeys(data []byte) (keys []string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, isKey := tok.(string)
		if !isKey {
			return nil, false
		}
		keys = append(keys, key)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, false
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, false
	}
	return keys, true
}

// exactKeys refuses, naming it, a key that is not exactly the JSON name of a field of the struct
// dst points to, or that appears more than once.
func exactKeys(keys []string, dst any) error {
	fields := jsonNames(reflect.TypeOf(dst).Elem())
	seen := make(map[string]bool, len(keys))
	for _, key := range keys {
		if !fields[key] {
			for name := range fields {
				if strings.EqualFold(name, key) {
					return badRequest("Unknown field %q: keys are matched exactly; the field is %q", key, name)
				}
			}
			return badRequest("Unknown field %q", key)
		}
		if seen[key] {
			return badRequest("Field %q appears more than once; each field may be given once", key)
		}
		seen[key] = true
	}
	return nil
}

// bodyFields caches jsonNames by type: the bodies are few and fixed.
var bodyFields sync.Map // reflect.Type -> map[string]bool

// jsonNames are the JSON names of a struct's fields, those of embedded structs included.
func jsonNames(t reflect.Type) map[string]bool {
	if names, ok := bodyFields.Load(t); ok {
		return names.(map[string]bool)
	}
	names := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			for embedded := range jsonNames(f.Type) {
				names[embedded] = true
			}
		case name != "":
			names[name] = true
		case f.IsExported():
			names[f.Name] = true
		}
	}
	bodyFields.Store(t, names)
	return names
}
