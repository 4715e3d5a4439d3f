package api

// SetUndeclaredHook lets the end-to-end tests hear of any status a route answers that its
// declaration, and so openapi.yaml, does not list.
func SetUndeclaredHook(s *Server, f func(pattern string, status int)) { s.undeclared = f }
