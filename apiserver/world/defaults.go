package world

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// defaultKind sets the decoder's defaults of the kinds defaultObject does
// not handle itself (defaults_*.go, each after the SetDefaults_ functions
// of its group in k8s.io/kubernetes v1.33). Kinds with no defaults are
// left as they are.
func defaultKind(obj runtime.Object) {
	switch o := obj.(type) {
	case *corev1.Endpoints:
		defaultEndpoints(o)
	case *corev1.LimitRange:
		defaultLimitRange(o)
	case *corev1.Namespace:
		defaultNamespace(o)
	case *corev1.Node:
		defaultNode(o)
	case *corev1.PersistentVolume:
		defaultPersistentVolume(o)
	case *corev1.PersistentVolumeClaim:
		defaultPVC(o)
	case *corev1.ReplicationController:
		defaultReplicationController(o)
	case *appsv1.DaemonSet:
		defaultDaemonSet(o)
	case *appsv1.StatefulSet:
		defaultStatefulSet(o)
	case *batchv1.Job:
		defaultJob(o)
	case *batchv1.CronJob:
		defaultCronJob(o)
	case *storagev1.StorageClass:
		defaultStorageClass(o)
	case *storagev1.CSIDriver:
		defaultCSIDriver(o)
	case *storagev1.VolumeAttachment:
		defaultVolumeAttachment(o)
	default:
		defaultAPIKind(obj)
	}
}

// defaultAPIKind is defaultKind for the kinds of the smaller groups
// (defaults_apis.go).
func defaultAPIKind(obj runtime.Object) {
	switch o := obj.(type) {
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		defaultValidatingWebhooks(o)
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		defaultMutatingWebhooks(o)
	case *admissionregistrationv1.ValidatingAdmissionPolicy:
		defaultValidatingAdmissionPolicy(o)
	case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
		defaultMatchResources(o.Spec.MatchResources)
	case *autoscalingv2.HorizontalPodAutoscaler:
		defaultHPA(o)
	case *autoscalingv1.HorizontalPodAutoscaler:
		defaultHPAv1(o)
	case *discoveryv1.EndpointSlice:
		defaultEndpointSlice(o)
	case *networkingv1.NetworkPolicy:
		defaultNetworkPolicy(o)
	case *networkingv1.IngressClass:
		defaultIngressClass(o)
	case *schedulingv1.PriorityClass:
		defaultPriorityClass(o)
	case *flowcontrolv1.FlowSchema:
		defaultFlowSchema(o)
	case *flowcontrolv1.PriorityLevelConfiguration:
		defaultPriorityLevel(o)
	default:
		defaultServerKind(obj)
	}
}
