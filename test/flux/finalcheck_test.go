package flux

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/do-now/function-karpenter/internal/cluster"
)

// TestFinalCheckListsWhatKarpenterLists holds the final check's one AWS
// call (internal/cluster, finalcheck.go) against the instances Karpenter
// v1.15.0 calls its own in a cluster: the filters of its instance
// provider's List (pkg/providers/instance/instance.go), read from its
// source, with their constants resolved through its sources, the core's
// (sigs.k8s.io/karpenter, at the version it requires) and the EC2 SDK's
// enums (at the version its go.sum pins). The cluster's name is the one
// value List computes: the claim's cluster.
func TestFinalCheckListsWhatKarpenterLists(t *testing.T) {
	provider := karpenterModule(t, "github.com/aws/karpenter-provider-aws@v1.15.0")
	core := module{"sigs.k8s.io/karpenter", "v1.15.0", metricLibraries["sigs.k8s.io/karpenter@v1.15.0"]}
	files, consts := parseModules(t, []module{provider, core})
	ec2 := requiredModule(t, provider, "github.com/aws/aws-sdk-go-v2/service/ec2")
	enums, err := parseGo("types/enums.go", ec2.file(t, "types/enums.go"))
	if err != nil {
		t.Fatal(err)
	}
	consts[ec2.Path+"/types"] = stringConsts(enums)

	const instancePkg = "github.com/aws/karpenter-provider-aws/pkg/providers/instance"
	var list *ast.FuncDecl
	var file goFile
	vars := map[string]ast.Expr{}
	for _, f := range files {
		if f.pkg != instancePkg {
			continue
		}
		for _, d := range f.ast.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Name.Name == "List" && d.Recv != nil {
					list, file = d, f
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if vs, ok := s.(*ast.ValueSpec); ok && d.Tok == token.VAR {
						for i, n := range vs.Names {
							if i < len(vs.Values) {
								vars[n.Name] = vs.Values[i]
							}
						}
					}
				}
			}
		}
	}
	if list == nil {
		t.Fatal("no List method in Karpenter's instance provider: the extraction is broken")
	}
	var filters []ast.Expr
	ast.Inspect(list.Body, func(n ast.Node) bool {
		kv, ok := n.(*ast.KeyValueExpr)
		if !ok {
			return true
		}
		if id, isID := kv.Key.(*ast.Ident); isID && id.Name == "Filters" {
			if lit, ok := kv.Value.(*ast.CompositeLit); ok {
				filters = lit.Elts
			}
		}
		return true
	})
	const clusterName = "<the cluster's name>"
	var value func(e ast.Expr) string
	value = func(e ast.Expr) string {
		if v := constOf(consts, file.pkg, file.imports, e); v != "" {
			return v
		}
		switch e := e.(type) {
		case *ast.CallExpr:
			fn := exprString(e.Fun)
			switch {
			case fn == "aws.String" || fn == "string":
				return value(e.Args[0])
			case fn == "fmt.Sprintf":
				format := constOf(consts, file.pkg, file.imports, e.Args[0])
				var args []any
				for _, a := range e.Args[1:] {
					args = append(args, constOf(consts, file.pkg, file.imports, a))
				}
				return fmt.Sprintf(format, args...)
			}
		case *ast.SelectorExpr:
			if e.Sel.Name == "ClusterName" {
				return clusterName
			}
		}
		t.Fatalf("cannot read %s in Karpenter's List", exprString(e))
		return ""
	}
	var karpenter []string
	for _, f := range filters {
		if id, ok := f.(*ast.Ident); ok {
			f = vars[id.Name]
		}
		lit, ok := f.(*ast.CompositeLit)
		if !ok {
			t.Fatalf("cannot read filter %s in Karpenter's List", exprString(f))
		}
		var name string
		var values []string
		for _, el := range lit.Elts {
			kv := el.(*ast.KeyValueExpr)
			switch kv.Key.(*ast.Ident).Name {
			case "Name":
				name = value(kv.Value)
			case "Values":
				for _, v := range kv.Value.(*ast.CompositeLit).Elts {
					values = append(values, value(v))
				}
			}
		}
		karpenter = append(karpenter, "Name="+name+",Values="+strings.Join(values, ","))
	}
	if len(karpenter) < 3 {
		t.Fatalf("read only %v from Karpenter's List: the extraction is broken", karpenter)
	}

	c := load(t, nil, nil)
	call := cluster.FinalCheckCall(c)
	if !slices.Equal(call.Args[:2], []string{"ec2", "describe-instances"}) {
		t.Fatalf("the final check calls %v, want ec2 describe-instances", call.Args[:2])
	}
	var ours []string
	for i := 2; i < len(call.Args); i++ {
		if call.Args[i] == "--filters" {
			for i++; i < len(call.Args) && !strings.HasPrefix(call.Args[i], "--"); i++ {
				ours = append(ours, strings.ReplaceAll(call.Args[i], "Values="+c.Spec.Cluster.Name, "Values="+clusterName))
			}
			break
		}
	}
	slices.Sort(ours)
	slices.Sort(karpenter)
	if diff := cmp.Diff(karpenter, ours); diff != "" {
		t.Errorf("the final check's filters (+) are not Karpenter v1.15.0's List's (-):\n%s", diff)
	}
}

// requiredModule is the module at path that m's go.mod requires, pinned by
// the hash m's go.sum holds for it.
func requiredModule(t *testing.T, m module, modPath string) module {
	t.Helper()
	version := ""
	for _, line := range strings.Split(string(m.file(t, "go.mod")), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == modPath {
			version = f[1]
		}
	}
	for _, line := range strings.Split(string(m.file(t, "go.sum")), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == modPath && f[1] == version {
			return module{modPath, version, f[2]}
		}
	}
	t.Fatalf("%s@%s: no version and hash of %s in its go.mod and go.sum", m.Path, m.Version, modPath)
	return module{}
}

// stringConsts are a file's constants whose value is a string literal.
func stringConsts(f *ast.File) map[string]string {
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						out[n.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
		}
	}
	return out
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	case *ast.CallExpr:
		return exprString(e.Fun) + "(…)"
	}
	return fmt.Sprintf("%T", e)
}

// parseGo parses one source file.
func parseGo(name string, src []byte) (*ast.File, error) {
	return parser.ParseFile(token.NewFileSet(), name, src, parser.SkipObjectResolution)
}
