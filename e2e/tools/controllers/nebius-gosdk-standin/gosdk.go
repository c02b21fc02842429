// Package gosdk is a stand-in for github.com/nebius/gosdk, which the module proxy does not serve
// (every version refused, 2026-12-02) and which provider-kubernetes v1.3.1 imports only for its
// Nebius identity (pkg/kube/client/nebius). It declares the four names that package uses and
// refuses to build a token source, so a Nebius identity fails loudly; the end-to-end tests use
// kubeconfig Secrets only. Nothing else of provider-kubernetes is replaced.
package gosdk

import (
	"context"
	"errors"

	"github.com/nebius/gosdk/auth"
)

// SDK is never built: New always fails.
type SDK struct{}

// Option and CredentialsOption are the shapes provider-kubernetes passes to New.
type (
	Option            any
	CredentialsOption any
)

// New refuses: this build has no Nebius SDK.
func New(context.Context, ...Option) (*SDK, error) {
	return nil, errors.New("provider-kubernetes built for the end-to-end tests: Nebius identities are not supported (github.com/nebius/gosdk is a stand-in)")
}

// WithCredentials and ServiceAccountReader only carry their argument.
func WithCredentials(c CredentialsOption) Option { return c }

// ServiceAccountReader carries the parser it is given.
func ServiceAccountReader(p auth.PrivateKeyParser) CredentialsOption { return p }

// BearerToken is never reached: New never returns an SDK.
func (*SDK) BearerToken(context.Context) (auth.BearerToken, error) {
	return auth.BearerToken{}, errors.New("no Nebius SDK in this build")
}
