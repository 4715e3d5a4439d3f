package api

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestUndeclaredHookHearsUnlistedStatuses checks the hook the end-to-end tests rely on to keep
// openapi.yaml true (every door of the idempotent-doors rule documented with every answer it
// gives): it hears a status a route does not declare, and stays silent for one it does.
func TestUndeclaredHookHearsUnlistedStatuses(t *testing.T) {
	s := New(Options{})
	var heard []int
	SetUndeclaredHook(s, func(_ string, status int) { heard = append(heard, status) })

	teapot := route{method: http.MethodGet, path: "/probe", access: noKey, statuses: []int{http.StatusOK},
		handle: func(http.ResponseWriter, *http.Request, *principal) (int, any, error) {
			return http.StatusTeapot, map[string]string{}, nil
		}}
	rec := httptest.NewRecorder()
	s.serve(teapot).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/probe", nil))
	require.Equal(t, http.StatusTeapot, rec.Code)
	require.Equal(t, []int{http.StatusTeapot}, heard)

	rec = httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, []int{http.StatusTeapot}, heard, "a declared status is not reported")
}
