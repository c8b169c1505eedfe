// Command funclen prints the functions of non-test Go files longer than a
// limit, longest first: the measure issue 32 holds every function to.
//
//	go run ./tools/funclen [-over 100] [DIR ...]
//
// A function's length is the lines from its func keyword to its closing
// brace, both included. Test files, testdata and vendor are left out.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type fn struct {
	pos   string
	name  string
	lines int
}

func main() {
	over := flag.Int("over", 100, "print the functions longer than this many lines")
	flag.Parse()
	dirs := flag.Args()
	if len(dirs) == 0 {
		dirs = []string{"."}
	}
	var found []fn
	fset := token.NewFileSet()
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if n := d.Name(); path != dir && (n == "testdata" || n == "vendor" || strings.HasPrefix(n, ".")) {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				var name string
				var start, end token.Pos
				switch n := n.(type) {
				case *ast.FuncDecl:
					name, start, end = n.Name.Name, n.Pos(), n.End()
					if n.Recv != nil && len(n.Recv.List) > 0 {
						name = "(" + recv(n.Recv.List[0].Type) + ")." + name
					}
				case *ast.FuncLit:
					name, start, end = "func literal", n.Pos(), n.End()
				default:
					return true
				}
				p := fset.Position(start)
				if l := fset.Position(end).Line - p.Line + 1; l > *over {
					found = append(found, fn{fmt.Sprintf("%s:%d", p.Filename, p.Line), name, l})
				}
				return true
			})
			return nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	sort.Slice(found, func(i, j int) bool { return found[i].lines > found[j].lines })
	for _, f := range found {
		fmt.Printf("%d %s %s\n", f.lines, f.name, f.pos)
	}
}

func recv(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return "*" + recv(e.X)
	case *ast.IndexExpr:
		return recv(e.X)
	case *ast.IndexListExpr:
		return recv(e.X)
	case *ast.Ident:
		return e.Name
	}
	return "?"
}
