// Package auth: the two names provider-kubernetes v1.3.1 uses from github.com/nebius/gosdk/auth
// (see the stand-in's package gosdk).
package auth

// BearerToken is what a token source yields.
type BearerToken struct{ Token string }

// PrivateKeyParser holds a service account's key.
type PrivateKeyParser struct {
	key                           []byte
	publicKeyID, serviceAccountID string
}

// NewPrivateKeyParser carries its arguments.
func NewPrivateKeyParser(key []byte, publicKeyID, serviceAccountID string) PrivateKeyParser {
	return PrivateKeyParser{key, publicKeyID, serviceAccountID}
}
