// Package apitest holds the API's answers to its own description: [Conform] wraps the API's
// handler in a test so that every answer the test provokes — whatever the route, status or
// scope — is checked against api/openapi.yaml as it is written. The API's clients are written
// from that document (the Go and TypeScript clients, and product code in other languages), so an
// answer it refuses is an answer some client misreads.
package apitest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// Document is api/openapi.yaml, loaded and validated once per process; a document that is not
// valid OpenAPI fails the test that asks for it.
func Document(t testing.TB) *openapi3.T {
	t.Helper()
	loadOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		loader := openapi3.NewLoader()
		loaded, err := loader.LoadFromFile(filepath.Join(filepath.Dir(file), "..", "openapi.yaml"))
		if err == nil {
			err = loaded.Validate(loader.Context)
		}
		doc, loadErr = loaded, err
	})
	if loadErr != nil {
		t.Fatalf("api/openapi.yaml: %v", loadErr)
	}
	return doc
}

var (
	loadOnce sync.Once
	doc      *openapi3.T
	loadErr  error
)

// Conform wraps h, the API's handler (api.Server.Handler), so that every answer it writes is
// checked once written: its status must be one its operation declares, its Content-Type the
// declared media type, its body valid under the declared schema (the schema of that status: an
// answer whose status says one thing and whose body another is refused by it), and a declared
// header valid when present. An answer outside every operation — no_route's 404, a method the path
// does not serve (405) — must be the Error schema. Each mismatch fails t, naming the request and
// the answer. The web console under /console/ is no part of the API, and is not checked.
func Conform(t testing.TB, h http.Handler) http.Handler {
	t.Helper()
	spec := Document(t)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/console" || strings.HasPrefix(r.URL.Path, "/console/") {
			h.ServeHTTP(w, r)
			return
		}
		rec := &recorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		if err := Check(spec, r, rec.answer()); err != nil {
			t.Errorf("%s %s answered %d, which api/openapi.yaml does not allow: %v\nbody: %s",
				r.Method, r.URL.RequestURI(), rec.answer().Status, err, truncate(rec.body.Bytes()))
		}
	})
}

// Answer is one response as the client read it.
type Answer struct {
	// Status is the HTTP status.
	Status int
	// Header holds the response's headers.
	Header http.Header
	// Body is the response's body, whole.
	Body []byte
}

// Check holds one answer to the request r against spec: nil when the document allows it.
func Check(spec *openapi3.T, r *http.Request, a Answer) error {
	path, item := operationPath(spec, r.URL.Path)
	var op *openapi3.Operation
	if item != nil {
		op = item.GetOperation(r.Method)
	}
	if op == nil {
		// No operation of the document answers here: the API's error shape, whatever the status.
		return checkError(spec, a)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: r,
			Route:   &routers.Route{Spec: spec, Path: path, PathItem: item, Method: r.Method, Operation: op},
		},
		Status:  a.Status,
		Header:  a.Header,
		Body:    io.NopCloser(bytes.NewReader(a.Body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	return openapi3filter.ValidateResponse(context.Background(), in)
}

// checkError holds an answer that no operation declares to the Error schema.
func checkError(spec *openapi3.T, a Answer) error {
	schema := spec.Components.Schemas["Error"]
	if schema == nil || schema.Value == nil {
		return fmt.Errorf("the document has no Error schema")
	}
	if ct := a.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return fmt.Errorf("an error answered as %q, not JSON", ct)
	}
	value, err := decodeJSON(a.Body)
	if err != nil {
		return fmt.Errorf("an error's body is not JSON: %w", err)
	}
	return schema.Value.VisitJSON(value, openapi3.VisitAsResponse(), openapi3.MultiErrors())
}

// decodeJSON reads a JSON body as kin-openapi's schemas take it (numbers as float64, as JSON
// Schema compares them).
func decodeJSON(body []byte) (any, error) {
	return openapi3filter.JSONBodyDecoder(bytes.NewReader(body), http.Header{}, nil, nil)
}

// operationPath finds the document's path that a request's path matches, as the API's ServeMux
// would: segment by segment, a {parameter} taking any one non-empty segment, the path with more
// literal segments winning. It answers "" and nil when none matches.
func operationPath(spec *openapi3.T, urlPath string) (string, *openapi3.PathItem) {
	segments := strings.Split(strings.Trim(urlPath, "/"), "/")
	best, bestLiterals := "", -1
	for path := range spec.Paths.Map() {
		pattern := strings.Split(strings.Trim(path, "/"), "/")
		if len(pattern) != len(segments) {
			continue
		}
		literals, ok := 0, true
		for i, p := range pattern {
			switch {
			case strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}"):
				ok = ok && segments[i] != ""
			case p == segments[i]:
				literals++
			default:
				ok = false
			}
		}
		if ok && literals > bestLiterals {
			best, bestLiterals = path, literals
		}
	}
	if best == "" {
		return "", nil
	}
	return best, spec.Paths.Value(best)
}

// recorder passes a response through to the client and keeps a copy of it.
type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the client's writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// answer is what was written.
func (r *recorder) answer() Answer {
	status := r.status
	if status == 0 {
		status = http.StatusOK
	}
	return Answer{Status: status, Header: r.Header().Clone(), Body: r.body.Bytes()}
}

// truncate keeps a failure's body readable.
func truncate(b []byte) string {
	const most = 2000
	if len(b) > most {
		return string(b[:most]) + "…"
	}
	return string(b)
}
