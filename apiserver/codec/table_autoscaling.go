package codec

import (
	"fmt"
	"strings"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The HorizontalPodAutoscaler printer of kube-apiserver v1.33
// (printHorizontalPodAutoscaler, formatHPAMetrics), for autoscaling/v2
// objects and for v1 ones through the v1 conversion of their CPU target.

func init() {
	printers[schema.GroupKind{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}] = printer{
		columns: []metav1.TableColumnDefinition{colName,
			col("Reference", doc133["HorizontalPodAutoscalerSpec.scaleTargetRef"]),
			col("Targets", doc133["HorizontalPodAutoscalerSpec.metrics"]),
			col("MinPods", doc133["HorizontalPodAutoscalerSpec.minReplicas"]),
			col("MaxPods", doc133["HorizontalPodAutoscalerSpec.maxReplicas"]),
			col("Replicas", doc133["HorizontalPodAutoscalerStatus.currentReplicas"]),
			colAge},
		cells: func(o runtime.Object, now time.Time) []any {
			hpa, ok := o.(*autoscalingv2.HorizontalPodAutoscaler)
			if !ok {
				hpa = hpaV2(o.(*autoscalingv1.HorizontalPodAutoscaler))
			}
			minPods := "<unset>"
			if hpa.Spec.MinReplicas != nil {
				minPods = fmt.Sprintf("%d", *hpa.Spec.MinReplicas)
			}
			ref := hpa.Spec.ScaleTargetRef.Kind + "/" + hpa.Spec.ScaleTargetRef.Name
			return []any{hpa.Name, ref, formatHPAMetrics(hpa.Spec.Metrics, hpa.Status.CurrentMetrics), minPods,
				int64(hpa.Spec.MaxReplicas), int64(hpa.Status.CurrentReplicas), age(hpa.CreationTimestamp, now)}
		},
	}
}

// hpaV2 is what the printer sees of a v1 object: its CPU target and
// current utilization as Resource metrics (the v1 conversion; the metrics
// a v1 object carries in annotations are not read).
func hpaV2(v1 *autoscalingv1.HorizontalPodAutoscaler) *autoscalingv2.HorizontalPodAutoscaler {
	out := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: v1.ObjectMeta}
	out.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{
		Kind: v1.Spec.ScaleTargetRef.Kind, Name: v1.Spec.ScaleTargetRef.Name, APIVersion: v1.Spec.ScaleTargetRef.APIVersion}
	out.Spec.MinReplicas, out.Spec.MaxReplicas = v1.Spec.MinReplicas, v1.Spec.MaxReplicas
	if u := v1.Spec.TargetCPUUtilizationPercentage; u != nil {
		out.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: u}}}}
	}
	out.Status.CurrentReplicas = v1.Status.CurrentReplicas
	if u := v1.Status.CurrentCPUUtilizationPercentage; u != nil {
		out.Status.CurrentMetrics = []autoscalingv2.MetricStatus{{Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceCPU,
				Current: autoscalingv2.MetricValueStatus{AverageUtilization: u}}}}
	}
	return out
}

// formatHPAMetrics is "current/target" of the first two metrics and how
// many more.
func formatHPAMetrics(specs []autoscalingv2.MetricSpec, statuses []autoscalingv2.MetricStatus) string {
	if len(specs) == 0 {
		return "<none>"
	}
	const max = 2
	list := []string{}
	status := func(i int) *autoscalingv2.MetricStatus {
		if i < len(statuses) {
			return &statuses[i]
		}
		return nil
	}
	percent := func(p *int32, def string) string {
		if p == nil {
			return def
		}
		return fmt.Sprintf("%d%%", *p)
	}
	for i, spec := range specs {
		st := status(i)
		current := "<unknown>"
		switch spec.Type {
		case autoscalingv2.ExternalMetricSourceType:
			if spec.External.Target.AverageValue != nil {
				if st != nil && st.External != nil && st.External.Current.AverageValue != nil {
					current = st.External.Current.AverageValue.String()
				}
				list = append(list, fmt.Sprintf("%s/%s (avg)", current, spec.External.Target.AverageValue.String()))
			} else {
				if st != nil && st.External != nil {
					current = st.External.Current.Value.String()
				}
				list = append(list, fmt.Sprintf("%s/%s", current, spec.External.Target.Value.String()))
			}
		case autoscalingv2.PodsMetricSourceType:
			if st != nil && st.Pods != nil {
				current = st.Pods.Current.AverageValue.String()
			}
			list = append(list, fmt.Sprintf("%s/%s", current, spec.Pods.Target.AverageValue.String()))
		case autoscalingv2.ObjectMetricSourceType:
			if spec.Object.Target.AverageValue != nil {
				if st != nil && st.Object != nil && st.Object.Current.AverageValue != nil {
					current = st.Object.Current.AverageValue.String()
				}
				list = append(list, fmt.Sprintf("%s/%s (avg)", current, spec.Object.Target.AverageValue.String()))
			} else {
				if st != nil && st.Object != nil {
					current = st.Object.Current.Value.String()
				}
				list = append(list, fmt.Sprintf("%s/%s", current, spec.Object.Target.Value.String()))
			}
		case autoscalingv2.ResourceMetricSourceType:
			if spec.Resource.Target.AverageValue != nil {
				if st != nil && st.Resource != nil {
					current = st.Resource.Current.AverageValue.String()
				}
				list = append(list, fmt.Sprintf("%s: %s/%s", spec.Resource.Name.String(), current, spec.Resource.Target.AverageValue.String()))
			} else {
				if st != nil && st.Resource != nil {
					current = percent(st.Resource.Current.AverageUtilization, current)
				}
				list = append(list, fmt.Sprintf("%s: %s/%s", spec.Resource.Name.String(), current, percent(spec.Resource.Target.AverageUtilization, "<auto>")))
			}
		case autoscalingv2.ContainerResourceMetricSourceType:
			if spec.ContainerResource.Target.AverageValue != nil {
				if st != nil && st.ContainerResource != nil {
					current = st.ContainerResource.Current.AverageValue.String()
				}
				list = append(list, fmt.Sprintf("%s: %s/%s", spec.ContainerResource.Name.String(), current, spec.ContainerResource.Target.AverageValue.String()))
			} else {
				if st != nil && st.ContainerResource != nil {
					current = percent(st.ContainerResource.Current.AverageUtilization, current)
				}
				list = append(list, fmt.Sprintf("%s: %s/%s", spec.ContainerResource.Name.String(), current, percent(spec.ContainerResource.Target.AverageUtilization, "<auto>")))
			}
		default:
			list = append(list, "<unknown type>")
		}
	}
	if len(list) > max {
		return fmt.Sprintf("%s + %d more...", strings.Join(list[:max], ", "), len(list)-max)
	}
	return strings.Join(list, ", ")
}
