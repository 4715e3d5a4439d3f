package jobbill_test

// The pages a reader checks the money rules against — README.md's map of the repository,
// BENCHMARKS.md and docs/*.md — name files, functions, tests and ledger functions in code spans.
// Those names are kept true by this test, not by review: a file renamed, a function moved or a
// ledger function replaced fails it until the pages say where the thing went. docs/history/ is a
// record of past runs, true of its own day, and is not read.

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docPages are the pages whose names must exist.
func docPages(t *testing.T) []string {
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md", "BENCHMARKS.md"}, pages...)
}

// codeSpan is one `code span` of a page, with the text up to the next span.
type codeSpan struct {
	text  string
	after string // the page's text between this span and the next
	line  int
}

// fence matches a fenced code block: commands and examples, not names of the repository.
var fence = regexp.MustCompile("(?ms)^\\s*```.*?^\\s*```")

// codeSpans are a page's code spans outside fenced blocks.
func codeSpans(page string) []codeSpan {
	page = fence.ReplaceAllStringFunc(page, func(block string) string {
		return strings.Repeat("\n", strings.Count(block, "\n")) // keep the line numbers
	})
	parts := strings.Split(page, "`")
	var spans []codeSpan
	line := 1
	for i, part := range parts {
		if i%2 == 1 && i+1 < len(parts) {
			spans = append(spans, codeSpan{text: part, after: parts[i+1], line: line})
		}
		line += strings.Count(part, "\n")
	}
	return spans
}

// repoIndex is what the pages' names are checked against: every file of the repository, and where
// each test function is declared.
type repoIndex struct {
	files    map[string]bool     // slash paths from the root
	dirs     map[string]bool     // slash paths from the root
	base     map[string]bool     // base names of files
	tests    map[string][]string // test function -> files declaring it
	topLevel map[string]bool     // the root's directories
	sqlCode  string              // every file of ledgerdb/code
	tables   map[string]bool     // tables the migrations create
	goSource string              // every non-test Go file, for string constants
}

var (
	testFunc    = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Example)\w*)\(`)
	createTable = regexp.MustCompile(`(?i)CREATE TABLE (\w+)`)
)

func indexRepo(t *testing.T) repoIndex {
	ix := repoIndex{files: map[string]bool{}, dirs: map[string]bool{}, base: map[string]bool{},
		tests: map[string][]string{}, topLevel: map[string]bool{}, tables: map[string]bool{}}
	var sqlCode, goSource strings.Builder
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "dist") {
				return filepath.SkipDir
			}
			ix.dirs[filepath.ToSlash(path)] = true
			if path != "." && !strings.Contains(filepath.ToSlash(path), "/") {
				ix.topLevel[path] = true
			}
			return nil
		}
		slash := filepath.ToSlash(path)
		ix.files[slash], ix.base[name] = true, true
		switch {
		case strings.HasSuffix(name, "_test.go"):
			src := readFile(t, path)
			for _, m := range testFunc.FindAllStringSubmatch(src, -1) {
				ix.tests[m[1]] = append(ix.tests[m[1]], slash)
			}
		case strings.HasSuffix(name, ".go"):
			goSource.WriteString(readFile(t, path))
		case strings.HasPrefix(slash, "ledgerdb/code/") && strings.HasSuffix(name, ".sql"):
			sqlCode.WriteString(readFile(t, path))
		case strings.HasPrefix(slash, "ledgerdb/migrations/") && strings.HasSuffix(name, ".sql"):
			for _, m := range createTable.FindAllStringSubmatch(readFile(t, path), -1) {
				ix.tables[m[1]] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ix.sqlCode, ix.goSource = sqlCode.String(), goSource.String()
	return ix
}

func readFile(t *testing.T, path string) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

var (
	// pathSpan is a span that may name a file or directory: no spaces, path characters only.
	pathSpan = regexp.MustCompile(`^[A-Za-z0-9_.<>*-]+(/[A-Za-z0-9_.<>*-]+)*/?$`)
	// fileExt are the extensions of the repository's own files that pages name.
	fileExt     = regexp.MustCompile(`\.(go|sql|sh|md|ya?ml|json|ts)$`)
	testName    = regexp.MustCompile(`^(Test|Fuzz|Example)[A-Z]\w*$`)
	goIdent     = regexp.MustCompile(`^[A-Za-z_]\w*(\.[A-Za-z_]\w*)?$`)
	ledgerName  = regexp.MustCompile(`^ledger_[a-z_]+$`)
	placeholder = regexp.MustCompile(`<[^>]*>`)
)

// TestDocsNameOnlyWhatExists checks every name of the repository the pages give in a code span:
// a path (from the root, or a file's base name) exists; a path ending in .go followed at once by
// a name (`app/app.go` `RunWorker`) declares that name; a test function exists, and in the file
// named right after it in parentheses when one is; a ledger_* name is a function of
// ledgerdb/code, a table of the migrations, or a name the Go code uses. It checks no money rule
// itself: it keeps the pages that state the rules pointing at the code that keeps them.
func TestDocsNameOnlyWhatExists(t *testing.T) {
	ix := indexRepo(t)
	stale := 0
	for _, page := range docPages(t) {
		spans := codeSpans(readFile(t, page))
		for i, s := range spans {
			problem := ix.check(s, spans[i+1:])
			if problem != "" {
				stale++
				t.Errorf("%s:%d: `%s` %s", page, s.line, s.text, problem)
			}
		}
	}
	if stale > 0 {
		t.Logf("%d names in the pages that the repository lacks", stale)
	}
}

// check answers what is wrong with a span's name, or "" when it names what exists (or names
// nothing of the repository).
func (ix repoIndex) check(s codeSpan, next []codeSpan) string {
	text := s.text
	switch {
	case testName.MatchString(text):
		files, ok := ix.tests[text]
		if !ok {
			return "is no test function of the repository"
		}
		if len(next) > 0 && strings.TrimSpace(s.after) == "(" && fileExt.MatchString(next[0].text) {
			if want := next[0].text; !slices.ContainsFunc(files, func(f string) bool { return f == want || filepath.Base(f) == want }) {
				return "is not declared in " + want + " but in " + strings.Join(files, ", ")
			}
		}
		return ""
	case ledgerName.MatchString(text):
		if regexp.MustCompile(`FUNCTION `+text+`\(`).MatchString(ix.sqlCode) || ix.tables[text] ||
			strings.Contains(ix.goSource, `"`+text+`"`) {
			return ""
		}
		return "is no ledger function (ledgerdb/code), table or name of the code"
	case !pathSpan.MatchString(text) || strings.HasPrefix(text, ".dev/"):
		// Not a path; or the local run's own files (.dev/ is git-ignored, made by make run).
		return ""
	}
	path := strings.TrimPrefix(strings.TrimSuffix(text, "/..."), "./")
	first, _, _ := strings.Cut(path, "/")
	dir, last := filepath.Split(path)
	switch {
	case !fileExt.MatchString(placeholder.ReplaceAllString(path, "x")) && !ix.topLevel[first]:
		// A word, a directory of a named package (`code/`), a MIME type, a workflow ID, a key's
		// pattern (`api.*`).
	case strings.ContainsAny(path, "*<"):
		pattern := placeholder.ReplaceAllString(path, "*")
		if matches, _ := filepath.Glob(pattern); len(matches) == 0 {
			return "matches no file of the repository"
		}
	case fileExt.MatchString(path):
		// From the root; or a file's base name, or a path from the directory the sentence is about
		// (`examples/webhook-receiver.ts` of the TypeScript client).
		if !ix.files[path] && !ix.endsAFile(path) {
			return "is no file of the repository"
		}
	case strings.Contains(last, ".") && ix.dirs[dir+strings.Split(last, ".")[0]]:
		// A package's name: `worker/workertest.Config`.
		if !ix.packageDeclares(dir+strings.Split(last, ".")[0], last) {
			return "names what its package does not declare"
		}
	case !ix.dirs[strings.TrimSuffix(path, "/")] && !ix.files[path]:
		return "is no file or directory of the repository"
	}
	if strings.HasSuffix(path, ".go") && ix.files[path] && len(next) > 0 && strings.TrimSpace(s.after) == "" && goIdent.MatchString(next[0].text) {
		if !declares(readFileQuiet(path), next[0].text) {
			return "does not declare " + next[0].text
		}
	}
	return ""
}

// endsAFile reports whether a file of the repository has path as its last elements.
func (ix repoIndex) endsAFile(path string) bool {
	for f := range ix.files {
		if f == path || strings.HasSuffix(f, "/"+path) {
			return true
		}
	}
	return false
}

// packageDeclares reports whether the Go package in dir declares pkgName's identifier (the part
// after the package's name: `workertest.Config`'s Config).
func (ix repoIndex) packageDeclares(dir, pkgName string) bool {
	_, name, _ := strings.Cut(pkgName, ".")
	for f := range ix.files {
		if filepath.Dir(f) == dir && strings.HasSuffix(f, ".go") && declares(readFileQuiet(f), name) {
			return true
		}
	}
	return false
}

func readFileQuiet(path string) string {
	raw, _ := os.ReadFile(path)
	return string(raw)
}

// declares reports whether Go source declares name: a function, type, variable or constant, or
// (as Type.Method, or a bare method name) a method.
func declares(src, name string) bool {
	typ, method, isMethod := strings.Cut(name, ".")
	var pattern string
	if isMethod {
		pattern = `(?m)^func \(\w+ \*?` + typ + `(\[[^\]]*\])?\) ` + method + `[\[(]`
	} else {
		q := regexp.QuoteMeta(name)
		pattern = `(?m)^func ` + q + `[\[(]|^func \([^)]*\) ` + q + `[\[(]|^(type|var|const) ` + q + `\b|^\t` + q + `\b`
	}
	return regexp.MustCompile(pattern).MatchString(src)
}
