package ledgerdb

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// TestInstallIncludesEveryFunctionFile keeps code/ the whole set of the ledger's functions:
// install.sql includes each function file exactly once, so that a file added without being
// included (its function never installed) or included twice cannot slip through review.
func TestInstallIncludesEveryFunctionFile(t *testing.T) {
	install, err := fs.ReadFile(codeFiles, "code/install.sql")
	if err != nil {
		t.Fatal(err)
	}
	included := map[string]int{}
	for _, m := range regexp.MustCompile(`\{\{ template "([^"]+\.sql)" \. \}\}`).FindAllStringSubmatch(string(install), -1) {
		included[m[1]]++
	}
	files, err := fs.Glob(codeFiles, "code/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := strings.TrimPrefix(f, "code/")
		switch {
		case name == "install.sql" || name == "security.sql":
		case included[name] != 1:
			t.Errorf("install.sql includes %s %d times; it must include every function file once", name, included[name])
		}
		delete(included, name)
	}
	for name := range included {
		t.Errorf("install.sql includes %s, which is not in code/", name)
	}
}
