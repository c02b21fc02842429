package flux

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/do-now/function-karpenter/internal/monitoring"
	"github.com/do-now/function-karpenter/internal/versions"
)

// metricLibraries are the modules Karpenter exports metrics from besides
// its own, with the hash of the version each Karpenter version requires.
var metricLibraries = map[string]string{
	"sigs.k8s.io/karpenter@v1.15.0":                                     "h1:5SEptlAvsOZbNg4qg8OSdF1qi6BEZHZLA020nXY7jGw=",
	"github.com/awslabs/operatorpkg@v0.0.0-20261002163259-5e8ed3699dea": "h1:MenUDyloRXUVB0C3Z6EAgxAe/hKxM0LUwmIYpJb4CD0=",
	"github.com/jonathan-innis/aws-sdk-go-prometheus@v0.1.1":            "h1:gmpuckrozJ3lfKqSIia9YMGh0caoQmEY7mQP5MsnbTM=",
	"sigs.k8s.io/controller-runtime@v0.24.1":                            "h1:miPEwrmirImAvgME1L9qebGHrOnGJoVmVdtOU9fRfo4=",
}

// unserved are library versions a Karpenter release requires that the
// module proxy refuses (403 "This module version is not available" on
// 2026-12-02), each with the nearest served version its metrics are read
// from instead: karpenter-provider-aws v1.15.2 requires the core at
// v1.15.1, a patch of the v1.15.0 read here.
var unserved = map[string]string{
	"sigs.k8s.io/karpenter@v1.15.1": "sigs.k8s.io/karpenter@v1.15.0",
}

// libraryPaths are the module paths of metricLibraries.
var libraryPaths = []string{"sigs.k8s.io/karpenter", "github.com/awslabs/operatorpkg", "github.com/jonathan-innis/aws-sdk-go-prometheus", "sigs.k8s.io/controller-runtime"}

// goFiles are a module's Go sources but its tests, by import path of
// their package.
func (m module) goFiles(t *testing.T) map[string]map[string][]byte {
	t.Helper()
	prefix := m.Path + "@" + m.Version + "/"
	out := map[string]map[string][]byte{}
	for _, f := range m.zip(t).File {
		name := strings.TrimPrefix(f.Name, prefix)
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || strings.HasPrefix(name, "test/") || strings.HasPrefix(name, "hack/") {
			continue
		}
		b := readZipFile(t, f)
		pkg := path.Join(m.Path, path.Dir(name))
		if out[pkg] == nil {
			out[pkg] = map[string][]byte{}
		}
		out[pkg][name] = b
	}
	return out
}

// A goFile is one parsed source file of a module, with its package's
// import path and its imports by the name it uses them under.
type goFile struct {
	pkg     string
	ast     *ast.File
	imports map[string]string
}

// parseModules parses the modules' sources and resolves their string
// constants across packages (package → constant → value), and the
// package-level variables set to one (Karpenter declares its tag keys as
// variables: karpenter-provider-aws pkg/apis/v1/labels.go).
func parseModules(t *testing.T, mods []module) ([]goFile, map[string]map[string]string) {
	t.Helper()
	consts := map[string]map[string]string{}
	var files []goFile
	fset := token.NewFileSet()
	for _, m := range mods {
		for pkg, srcs := range m.goFiles(t) {
			for name, src := range srcs {
				f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
				if err != nil {
					continue // a file for another toolchain or platform
				}
				imports := map[string]string{}
				for _, im := range f.Imports {
					p, _ := strconv.Unquote(im.Path.Value)
					alias := path.Base(p)
					if im.Name != nil {
						alias = im.Name.Name
					}
					imports[alias] = p
				}
				files = append(files, goFile{pkg, f, imports})
			}
		}
	}
	// String constants, literals or other constants (DepthKey =
	// metrics.DepthKey): resolved until nothing changes.
	for changed := true; changed; {
		changed = false
		for _, f := range files {
			for _, d := range f.ast.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.CONST && g.Tok != token.VAR {
					continue
				}
				for _, s := range g.Specs {
					vs := s.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i >= len(vs.Values) || consts[f.pkg][n.Name] != "" {
							continue
						}
						if v := constOf(consts, f.pkg, f.imports, vs.Values[i]); v != "" {
							if consts[f.pkg] == nil {
								consts[f.pkg] = map[string]string{}
							}
							consts[f.pkg][n.Name], changed = v, true
						}
					}
				}
			}
		}
	}
	return files, consts
}

// exported are the metric names a set of modules register: every
// prometheus.{Counter,Gauge,Histogram,Summary}Opts literal's Namespace,
// Subsystem and Name, joined as Prometheus joins them, with string
// constants resolved across packages. A part that is computed (operatorpkg
// names its status metrics after each object's kind) is kept as *.
func exported(t *testing.T, mods []module) []string {
	t.Helper()
	files, consts := parseModules(t, mods)
	// values are what an expression can be: a constant, a concatenation,
	// a local variable's value, fmt.Sprintf of values, either branch of
	// lo.Ternary; * for what is computed at run time.
	var values func(f goFile, fn *ast.FuncDecl, e ast.Expr, depth int) []string
	values = func(f goFile, fn *ast.FuncDecl, e ast.Expr, depth int) []string {
		if depth > 5 {
			return []string{"*"}
		}
		if v := constOf(consts, f.pkg, f.imports, e); v != "" {
			return []string{v}
		}
		switch e := e.(type) {
		case *ast.BinaryExpr:
			if e.Op == token.ADD {
				var out []string
				for _, x := range values(f, fn, e.X, depth+1) {
					for _, y := range values(f, fn, e.Y, depth+1) {
						out = append(out, x+y)
					}
				}
				return out
			}
		case *ast.Ident:
			if fn != nil && fn.Body != nil {
				var out []string
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					a, ok := n.(*ast.AssignStmt)
					if ok && len(a.Lhs) == 1 && len(a.Rhs) == 1 {
						if id, ok := a.Lhs[0].(*ast.Ident); ok && id.Name == e.Name {
							out = append(out, values(f, fn, a.Rhs[0], depth+1)...)
						}
					}
					return true
				})
				if len(out) > 0 {
					return out
				}
			}
		case *ast.CallExpr:
			if sel, ok := e.Fun.(*ast.SelectorExpr); ok {
				switch sel.Sel.Name {
				case "Ternary":
					if len(e.Args) == 3 {
						return append(values(f, fn, e.Args[1], depth+1), values(f, fn, e.Args[2], depth+1)...)
					}
				case "Sprintf":
					if len(e.Args) > 0 {
						out := values(f, fn, e.Args[0], depth+1)
						for _, a := range e.Args[1:] {
							var next []string
							for _, o := range out {
								for _, v := range values(f, fn, a, depth+1) {
									next = append(next, strings.Replace(o, "%s", v, 1))
								}
							}
							out = next
						}
						return out
					}
				}
			}
		}
		return []string{"*"}
	}
	opts := regexp.MustCompile(`^(Counter|Gauge|Histogram|Summary)Opts$`)
	var names []string
	for _, f := range files {
		for _, d := range f.ast.Decls {
			fn, _ := d.(*ast.FuncDecl)
			ast.Inspect(d, func(n ast.Node) bool {
				lit, ok := n.(*ast.CompositeLit)
				if !ok {
					return true
				}
				sel, ok := lit.Type.(*ast.SelectorExpr)
				if !ok || !opts.MatchString(sel.Sel.Name) {
					return true
				}
				full := []string{""}
				for _, k := range []string{"Namespace", "Subsystem", "Name"} {
					for _, el := range lit.Elts {
						kv, ok := el.(*ast.KeyValueExpr)
						if id, isID := kv.Key.(*ast.Ident); !ok || !isID || id.Name != k {
							continue
						}
						var next []string
						for _, prefix := range full {
							for _, v := range values(f, fn, kv.Value, 0) {
								next = append(next, strings.Trim(prefix+"_"+v, "_"))
							}
						}
						full = next
					}
				}
				for _, n := range full {
					if n != "" {
						names = append(names, n)
					}
				}
				return true
			})
		}
	}
	return names
}

// constOf is a string constant's value: a literal, a constant of the
// package or of one it imports, or a concatenation of those; "" when e is
// none.
func constOf(consts map[string]map[string]string, pkg string, imports map[string]string, e ast.Expr) string {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			v, _ := strconv.Unquote(e.Value)
			return v
		}
	case *ast.Ident:
		return consts[pkg][e.Name]
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok {
			return consts[imports[x.Name]][e.Sel.Name]
		}
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			x, y := constOf(consts, pkg, imports, e.X), constOf(consts, pkg, imports, e.Y)
			if x != "" && y != "" {
				return x + y
			}
		}
	}
	return ""
}

// statusKinds are the kinds Karpenter runs operatorpkg's status controller
// for, lower-cased as its metric names spell them.
func statusKinds(t *testing.T, mods []module) []string {
	t.Helper()
	re := regexp.MustCompile(`status\.NewController\[\*?(?:\w+\.)?(\w+)\]`)
	var kinds []string
	for _, m := range mods {
		for _, srcs := range m.goFiles(t) {
			for _, src := range srcs {
				for _, k := range re.FindAllStringSubmatch(string(src), -1) {
					kinds = append(kinds, strings.ToLower(k[1]))
				}
			}
		}
	}
	return kinds
}

// referenced are the metric names a PromQL expression selects: what is
// left of it once strings, label matchers, grouping clauses, functions
// and numbers are taken out; a histogram's _bucket series is its metric.
func referenced(expr string) []string {
	for _, re := range []string{`"[^"]*"`, `\{[^}]*\}`, `\[[^\]]*\]`, `\b(by|on|without|ignoring|group_left|group_right)\s*\([^)]*\)`} {
		expr = regexp.MustCompile(re).ReplaceAllString(expr, " ")
	}
	functions := map[string]bool{"sum": true, "max": true, "min": true, "avg": true, "count": true, "rate": true, "increase": true, "irate": true, "histogram_quantile": true,
		"absent": true, "vector": true, "and": true, "or": true, "unless": true}
	var out []string
	for _, id := range regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`).FindAllString(expr, -1) {
		if !functions[id] {
			out = append(out, strings.TrimSuffix(id, "_bucket"))
		}
	}
	return out
}

// TestMetricsExist holds every metric an alert or a dashboard panel reads
// against the names Karpenter's newest version, and the libraries it
// requires at the versions it requires them, register in their sources:
// a metric renamed upstream fails here, not on a platform's dashboard.
func TestMetricsExist(t *testing.T) {
	newest := versions.All[len(versions.All)-1]
	aws := karpenterModule(t, newest.Module)
	mods := []module{aws}
	gomod := string(aws.file(t, "go.mod"))
	for _, p := range libraryPaths {
		m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(p) + `\s+(\S+)`).FindStringSubmatch(gomod)
		if m == nil {
			t.Fatalf("Karpenter %s's go.mod requires no %s", newest.Version, p)
		}
		ref := p + "@" + m[1]
		if nearest, ok := unserved[ref]; ok {
			t.Logf("Karpenter %s requires %s, which the module proxy does not serve: its metrics are read from %s", newest.Version, ref, nearest)
			ref = nearest
		}
		sum, ok := metricLibraries[ref]
		if !ok {
			t.Fatalf("Karpenter %s requires %s: pin its hash in metricLibraries (go mod download -json %s)", newest.Version, ref, ref)
		}
		_, version, _ := strings.Cut(ref, "@")
		mods = append(mods, module{p, version, sum})
	}
	names := exported(t, mods)
	if len(names) < 80 {
		t.Fatalf("read only %d metric names from Karpenter %s and its libraries: the extraction is broken", len(names), newest.Version)
	}
	kinds := statusKinds(t, mods)
	exists := func(name string) bool {
		for _, n := range names {
			if n == name {
				return true
			}
			if strings.Contains(n, "*") {
				for _, k := range kinds {
					if strings.Replace(n, "*", k, 1) == name {
						return true
					}
				}
			}
		}
		return false
	}
	var used []string
	for _, e := range monitoring.Exprs() {
		used = append(used, referenced(e)...)
	}
	slices.Sort(used)
	used = slices.Compact(used)
	if len(used) < 10 {
		t.Fatalf("the rules and dashboards read only %v", used)
	}
	for _, n := range used {
		// Prometheus itself writes up for every scrape target (v0.316.0
		// scrape/scrape.go, scrapeHealthMetric).
		if n == "up" {
			continue
		}
		if !exists(n) {
			t.Errorf("%s, which the monitoring reads, is registered by neither Karpenter %s nor the libraries it exports metrics from", n, newest.Version)
		}
	}
	// The extraction must not pass anything: a name nobody registers fails.
	if exists("karpenter_nodepools_usage_total") || exists("operator_widget_status_condition_count") {
		t.Error("names no source registers pass the check")
	}
}
