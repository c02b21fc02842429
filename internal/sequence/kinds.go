package sequence

import (
	"fmt"
	"slices"

	"github.com/crossplane/function-sdk-go/resource"
)

// KindChanges lists the composed resources observed as one kind and now
// built as another under the same name, as when the Kustomizations moved
// into Objects. Crossplane cannot change a composed resource's kind: it
// would apply the new kind under the old object's name and leave the old
// object running beside it, or delete it with what it manages. The
// function refuses such an XR until the platform has let the old objects
// go (docs/operating.md "Upgrading an existing installation").
func KindChanges(observed map[resource.Name]resource.ObservedComposed, built ...map[resource.Name]*resource.DesiredComposed) []string {
	var out []string
	for _, b := range built {
		for name, dc := range b {
			o, ok := observed[name]
			if !ok {
				continue
			}
			was, now := o.Resource.GroupVersionKind().GroupKind(), dc.Resource.GroupVersionKind().GroupKind()
			if was != now {
				out = append(out, fmt.Sprintf("%s: %s %s/%s (%s) is now composed as %s (%s)",
					name, was.Kind, o.Resource.GetNamespace(), o.Resource.GetName(), was.Group, now.Kind, now.Group))
			}
		}
	}
	slices.Sort(out)
	return out
}
