// Command linkcheck checks that every link in the project's documentation
// resolves: each relative link names a file of the tree, and each anchor a
// heading of the Markdown file it points into, as GitHub derives anchors
// from headings. A link to the repository's own files on GitHub (the
// alerts' runbook_url) is checked as the relative link it stands for, in
// any file given.
//
//	go run ./hack/linkcheck -repo https://github.com/do-now/function-karpenter/blob/main/ README.md docs examples/gitops/monitoring/prometheusrule.yaml
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

func main() {
	repo := flag.String("repo", "", "the URL prefix of the repository's files on its main branch")
	flag.Parse()
	var files []string
	for _, arg := range flag.Args() {
		err := filepath.WalkDir(arg, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files = append(files, p)
			}
			return err
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	broken, checked := 0, 0
	for _, f := range files {
		for _, l := range links(f, *repo) {
			checked++
			if err := resolve(f, l); err != nil {
				fmt.Fprintf(os.Stderr, "%s: %s: %v\n", f, l, err)
				broken++
			}
		}
	}
	if broken > 0 {
		fmt.Fprintf(os.Stderr, "linkcheck: %d of %d links broken\n", broken, checked)
		os.Exit(1)
	}
	fmt.Printf("linkcheck: %d links in %d files resolve\n", checked, len(files))
}

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	fence     = regexp.MustCompile("^\\s*```")
	codeSpan  = regexp.MustCompile("`[^`]*`")
	heading   = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	notAnchor = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// links are the links of file f to check: in Markdown, every link outside
// code blocks that is not to another site; in any file, every URL under
// repo, rewritten as a link relative to the tree's root (a leading "/").
func links(f, repo string) []string {
	b, err := os.ReadFile(f)
	if err != nil {
		return []string{"(unreadable: " + err.Error() + ")"}
	}
	var out []string
	inFence := false
	repoURL := regexp.MustCompile(regexp.QuoteMeta(repo) + `[^\s"')>]+`)
	for _, line := range strings.Split(string(b), "\n") {
		if repo != "" {
			for _, m := range repoURL.FindAllString(line, -1) {
				out = append(out, "/"+strings.TrimPrefix(m, repo))
			}
		}
		if !strings.HasSuffix(f, ".md") {
			continue
		}
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(stripCode(line), -1) {
			if !strings.Contains(m[1], "://") && !strings.HasPrefix(m[1], "mailto:") {
				out = append(out, m[1])
			}
		}
	}
	return out
}

// stripCode drops inline code spans, where brackets are not links.
func stripCode(line string) string {
	return codeSpan.ReplaceAllString(line, "")
}

// resolve checks one link of file from.
func resolve(from, link string) error {
	target, anchor, _ := strings.Cut(link, "#")
	switch {
	case target == "":
		target = from
	case strings.HasPrefix(target, "/"):
		target = strings.TrimPrefix(target, "/")
	default:
		target = filepath.Join(filepath.Dir(from), target)
	}
	if _, err := os.Stat(target); err != nil {
		return fmt.Errorf("no file %s", target)
	}
	if anchor == "" {
		return nil
	}
	if !strings.HasSuffix(target, ".md") {
		return fmt.Errorf("an anchor into %s, which is not Markdown", target)
	}
	b, err := os.ReadFile(target)
	if err != nil {
		return err
	}
	have := Anchors(string(b))
	if !have[anchor] {
		return fmt.Errorf("no heading of %s has the anchor #%s (it has %s)", target, anchor, nearest(have, anchor))
	}
	return nil
}

// Anchors are the anchors GitHub gives a Markdown document's headings:
// lower case, every character but letters, digits, spaces, hyphens and
// underscores dropped, spaces turned to hyphens, and a repeated anchor
// suffixed -1, -2, ….
func Anchors(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(doc, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		m := heading.FindStringSubmatch(line)
		if inFence || m == nil {
			continue
		}
		a := notAnchor.ReplaceAllString(strings.ToLower(m[1]), "")
		a = strings.ReplaceAll(a, " ", "-")
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// nearest names the anchors sharing the wanted one's first word, to help
// whoever fixes the link.
func nearest(have map[string]bool, want string) string {
	first, _, _ := strings.Cut(want, "-")
	var out []string
	for a := range have {
		if strings.HasPrefix(a, first) {
			out = append(out, "#"+a)
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "none alike"
	}
	return strings.Join(out, ", ")
}
