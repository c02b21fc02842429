// Package pkgtest checks the project's Crossplane packages the way a cluster reads them:
// `make release` pushes the Function (multi-platform) and the Configuration to a registry on
// 127.0.0.1, the tests pull them back and compare what is inside with the repository's files.
// It also checks that the version and the function's name agree everywhere they are written.
//
// Run it with `make package-test`, which builds the tools and passes their paths.
package pkgtest
