package policy

// Exported for the tests of package policy_test, which reads the versions
// table (internal/versions imports this package).
var (
	ParseJSON           = parseJSON
	NormaliseStatements = normaliseStatements
	ReplaceStrings      = replaceStrings
	Arns                = arns
	Placeholders        = placeholders
)
