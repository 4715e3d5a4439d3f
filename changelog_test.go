package jobbill_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// changeGroups are the headings a section of CHANGELOG.md may have, in the order they come.
var changeGroups = []string{"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}

// datedSection matches a dated section's heading: "## 2026-12-01", or "## [1.0.0] - 2026-12-01"
// once versions are numbered.
var datedSection = regexp.MustCompile(`^## (?:\[[^\]]+\] - )?(\d{4}-\d{2}-\d{2})$`)

// TestChangelogFollowsItsFormat holds CHANGELOG.md — what changed for a caller of the HTTP API and
// of the Temporal contract — to its form, so that a caller can read it by its headings: the title;
// "## [Unreleased]" first; then one section per day, dated, newest first, each date once; in a
// section, only the groups Added, Changed, Deprecated, Removed, Fixed and Security, each at most
// once, in that order, none empty, holding only list items; and the README and the development
// guide link to it. It checks no money rule: it keeps the record of the doors' changes readable.
func TestChangelogFollowsItsFormat(t *testing.T) {
	lines := strings.Split(readFile(t, "CHANGELOG.md"), "\n")
	if lines[0] != "# Changelog" {
		t.Errorf("CHANGELOG.md:1: the title is %q, not \"# Changelog\"", lines[0])
	}

	var (
		sections  []string  // the second-level headings, in order
		lastDate  time.Time // the date of the previous dated section
		groups    []string  // the current section's groups, in order
		items     int       // list items in the current group
		inGroup   bool      // a group heading was seen in the current section
		groupLine int       // the current group's heading line
	)
	// closeGroup checks the group that ends here.
	closeGroup := func() {
		if inGroup && items == 0 {
			t.Errorf("CHANGELOG.md:%d: the group %q of %s is empty", groupLine, groups[len(groups)-1], sections[len(sections)-1])
		}
		items = 0
	}
	// closeUp checks the group and the section that end before line n.
	closeUp := func(n int) {
		closeGroup()
		if len(sections) > 0 && len(groups) == 0 {
			t.Errorf("CHANGELOG.md:%d: the section %s has no group (Added, Changed, …)", n, sections[len(sections)-1])
		}
		groups, inGroup = nil, false
	}
	for i, line := range lines {
		n := i + 1
		switch {
		case i == 0: // the title, checked above
		case strings.HasPrefix(line, "## "):
			closeUp(n)
			sections = append(sections, line)
			if len(sections) == 1 {
				if line != "## [Unreleased]" {
					t.Errorf("CHANGELOG.md:%d: the first section is %q, not \"## [Unreleased]\"", n, line)
				}
				continue
			}
			m := datedSection.FindStringSubmatch(line)
			if m == nil {
				t.Errorf("CHANGELOG.md:%d: %q is neither \"## [Unreleased]\" (first) nor a dated section (\"## 2026-12-01\")", n, line)
				continue
			}
			date, err := time.Parse(time.DateOnly, m[1])
			if err != nil {
				t.Errorf("CHANGELOG.md:%d: %q is no date: %v", n, m[1], err)
				continue
			}
			if !lastDate.IsZero() && !date.Before(lastDate) {
				t.Errorf("CHANGELOG.md:%d: %s does not come before the section above it (%s): newest first, each day once", n, m[1], lastDate.Format(time.DateOnly))
			}
			lastDate = date
		case strings.HasPrefix(line, "### "):
			closeGroup()
			name := strings.TrimPrefix(line, "### ")
			switch {
			case len(sections) == 0:
				t.Errorf("CHANGELOG.md:%d: the group %q comes before any section", n, name)
			case !slices.Contains(changeGroups, name):
				t.Errorf("CHANGELOG.md:%d: %q is not one of the groups %v", n, name, changeGroups)
			case len(groups) > 0 && slices.Index(changeGroups, name) <= slices.Index(changeGroups, groups[len(groups)-1]):
				t.Errorf("CHANGELOG.md:%d: %q comes after %q: the groups come once each, in the order %v", n, name, groups[len(groups)-1], changeGroups)
			}
			groups, inGroup, groupLine = append(groups, name), true, n
		case strings.HasPrefix(line, "#"):
			t.Errorf("CHANGELOG.md:%d: %q: only the title, sections (##) and groups (###) are headings", n, line)
		case inGroup && strings.HasPrefix(line, "- "):
			items++
		case inGroup && line != "" && !strings.HasPrefix(line, "  "):
			t.Errorf("CHANGELOG.md:%d: a group holds list items only (\"- \", continued indented by two spaces), not %q", n, line)
		}
	}
	closeUp(len(lines))
	if len(sections) < 2 {
		t.Errorf("CHANGELOG.md has %d sections: an Unreleased one and at least one dated", len(sections))
	}

	for _, page := range []string{"README.md", "docs/development.md"} {
		if !strings.Contains(readFile(t, page), "CHANGELOG.md)") {
			t.Errorf("%s does not link to CHANGELOG.md", page)
		}
	}
}
