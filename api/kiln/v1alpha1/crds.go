package v1alpha1

// AnnotationCRDsVersion is what the chart's CRD hook (kiln-operator --apply-crds) records on
// each of Kiln's CRDs: the release whose schemas they are. The hook refuses to replace a
// newer release's; the conformance suite checks that every CRD is of one release.
const AnnotationCRDsVersion = "kiln.dev/crds-version"
