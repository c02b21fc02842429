package flux

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// crdSchema is one served version of a CRD, prepared the way the API
// server's custom resource handler prepares it.
type crdSchema struct {
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	// cel is nil when the version has no x-kubernetes-validations.
	cel        *cel.Validator
	namespaced bool
}

// crdSchemas are the schemas of several CRDs by group/version/kind.
type crdSchemas map[schema.GroupVersionKind]*crdSchema

// loadCRDs prepares every served version's schema of CRDs.
func loadCRDs(t *testing.T, crds ...[]byte) crdSchemas {
	t.Helper()
	out := crdSchemas{}
	for _, b := range crds {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, crd); err != nil {
			t.Fatalf("cannot decode a CRD: %v", err)
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served || v.Schema == nil {
				continue
			}
			internal := &apiextensions.CustomResourceValidation{}
			if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, internal, nil); err != nil {
				t.Fatalf("cannot convert the schema of %s %s: %v", crd.Name, v.Name, err)
			}
			s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
			if err != nil {
				t.Fatalf("schema of %s %s is not structural: %v", crd.Name, v.Name, err)
			}
			if err := structuraldefaulting.PruneDefaults(s); err != nil {
				t.Fatalf("cannot prune the defaults of %s %s: %v", crd.Name, v.Name, err)
			}
			validator, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
			if err != nil {
				t.Fatalf("cannot build the validator of %s %s: %v", crd.Name, v.Name, err)
			}
			gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
			out[gvk] = &crdSchema{
				structural: s,
				validator:  validator,
				cel:        cel.NewValidator(s, true, celconfig.PerCallLimit),
				namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
			}
		}
	}
	return out
}

// admit does to a custom resource what the API server does on create: it
// refuses unknown fields (as a strict server-side apply would), drops
// non-nullable nulls, applies the schema's defaults, then validates
// metadata, the OpenAPI schema, list types and the CEL rules. It returns the
// object as it would be stored.
func (c crdSchemas) admit(obj *unstructured.Unstructured) (*unstructured.Unstructured, field.ErrorList) {
	s, ok := c[obj.GroupVersionKind()]
	if !ok {
		return nil, field.ErrorList{field.NotFound(field.NewPath("apiVersion"), obj.GroupVersionKind().String())}
	}
	u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(obj.Object)}

	var errs field.ErrorList
	unknown := structuralpruning.PruneWithOptions(u.Object, s.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	for _, p := range unknown {
		errs = append(errs, field.Forbidden(field.NewPath(p), "unknown field"))
	}
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, s.structural)
	if err := schemaobjectmeta.Coerce(nil, u.Object, s.structural, true, false); err != nil {
		errs = append(errs, err)
	}
	structuraldefaulting.Default(u.Object, s.structural)

	errs = append(errs, apimachineryvalidation.ValidateObjectMetaAccessor(u, s.namespaced, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, u.Object, s.validator)...)
	errs = append(errs, schemaobjectmeta.Validate(nil, u.Object, s.structural, false)...)
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, s.structural, u.Object)...)
	if s.cel != nil {
		if blocking(errs) {
			errs = append(errs, field.InternalError(nil, errors.New("CEL rules not checked because the object is invalid")))
		} else {
			celErrs, _ := s.cel.Validate(context.Background(), nil, s.structural, u.Object, nil, celconfig.RuntimeCELCostBudget)
			errs = append(errs, celErrs...)
		}
	}
	return u, errs
}

// blocking tells whether the API server would skip the CEL rules: it does
// when the object does not even match the schema's types.
func blocking(errs field.ErrorList) bool {
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return true
		}
	}
	return false
}

// mustAdmit fails the test when the API server would refuse obj.
func (c crdSchemas) mustAdmit(t *testing.T, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	stored, errs := c.admit(obj)
	if len(errs) > 0 {
		t.Errorf("%s %s would be refused by the API server:\n%s", obj.GetKind(), obj.GetName(), errorLines(errs))
	}
	return stored
}

func errorLines(errs field.ErrorList) string {
	s := ""
	for _, e := range errs {
		s += fmt.Sprintf("  - %v\n", e)
	}
	return s
}
