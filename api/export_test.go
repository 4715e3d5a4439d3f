package api

// SetUndeclaredHook lets the end-to-end tests hear of any status a route answers that its
// declaration, and so openapi.yaml, does not list.
func SetUndeclaredHook(s *Server, f func(pattern string, status int)) { s.undeclared = f }

// RouteScopes are the route table's routes that take a key, each as its ServeMux pattern
// ("METHOD /path/{param}") with the scopes that may call it, so that the end-to-end tests can
// tell a route their probes leave out.
func RouteScopes() map[string][]string {
	routes := map[string][]string{}
	for _, rt := range New(Options{}).routes {
		if rt.access.public {
			continue
		}
		for _, scope := range rt.access.scopes {
			routes[rt.method+" "+rt.path] = append(routes[rt.method+" "+rt.path], string(scope))
		}
	}
	return routes
}
