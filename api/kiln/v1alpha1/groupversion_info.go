package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is kiln.dev/v1alpha1.
	GroupVersion = schema.GroupVersion{Group: "kiln.dev", Version: "v1alpha1"}
	// SchemeBuilder registers the kinds of this group version.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the kinds of this group version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &CronTrainJob{}, &CronTrainJobList{}, &TrainJobMetrics{}, &TrainJobMetricsList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
