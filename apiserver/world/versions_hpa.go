package world

import (
	"encoding/json"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// autoscaling/v1 and autoscaling/v2 HorizontalPodAutoscalers are one
// storage (autoscaling/v2's), converted as pkg/apis/autoscaling/v1's
// conversion.go does (v2 is the internal version's shape). autoscaling/v1
// has one metric, a CPU utilization target; it keeps what it has no field
// for in annotations, which its conversion to v2 reads and drops:
const (
	// hpaMetricsAnnotation: the spec's other metrics, as v1 MetricSpecs.
	hpaMetricsAnnotation = "autoscaling.alpha.kubernetes.io/metrics"
	// hpaCurrentMetricsAnnotation: every current metric, as v1 MetricStatuses.
	hpaCurrentMetricsAnnotation = "autoscaling.alpha.kubernetes.io/current-metrics"
	// hpaConditionsAnnotation: the conditions, as v1 conditions.
	hpaConditionsAnnotation = "autoscaling.alpha.kubernetes.io/conditions"
	// hpaBehaviorAnnotation: the behavior, as the internal type (which
	// has no JSON tags: its members are named as its Go fields).
	hpaBehaviorAnnotation = "autoscaling.alpha.kubernetes.io/behavior"
)

// hpaDefaultCPU is the CPU utilization v1's conversion targets when an
// HPA names no metric (autoscaling.DefaultCPUUtilization).
const hpaDefaultCPU = 80

// dropHPAAnnotations is DropRoundTripHorizontalPodAutoscalerAnnotations: in
// without the round-trip annotations (a copy when it had any).
func dropHPAAnnotations(in map[string]string) map[string]string {
	has := false
	for _, k := range []string{hpaMetricsAnnotation, hpaCurrentMetricsAnnotation, hpaConditionsAnnotation, hpaBehaviorAnnotation} {
		if _, ok := in[k]; ok {
			has = true
		}
	}
	if !has {
		return in
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	delete(out, hpaMetricsAnnotation)
	delete(out, hpaCurrentMetricsAnnotation)
	delete(out, hpaConditionsAnnotation)
	delete(out, hpaBehaviorAnnotation)
	return out
}

// hpaToV1 converts an autoscaling/v2 HPA to autoscaling/v1
// (Convert_autoscaling_HorizontalPodAutoscaler_To_v1_HorizontalPodAutoscaler).
func hpaToV1(in *autoscalingv2.HorizontalPodAutoscaler) (*autoscalingv1.HorizontalPodAutoscaler, error) {
	in = in.DeepCopy()
	out := &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: in.ObjectMeta}
	out.Annotations = dropHPAAnnotations(out.Annotations)
	out.Spec = autoscalingv1.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv1.CrossVersionObjectReference(in.Spec.ScaleTargetRef),
		MinReplicas:    in.Spec.MinReplicas,
		MaxReplicas:    in.Spec.MaxReplicas,
	}
	var other []autoscalingv1.MetricSpec
	for _, m := range in.Spec.Metrics {
		if isCPUUtilization(m) {
			if out.Spec.TargetCPUUtilizationPercentage == nil {
				out.Spec.TargetCPUUtilizationPercentage = m.Resource.Target.AverageUtilization
			}
			continue
		}
		other = append(other, metricSpecToV1(m))
	}
	out.Status = autoscalingv1.HorizontalPodAutoscalerStatus{
		ObservedGeneration: in.Status.ObservedGeneration,
		LastScaleTime:      in.Status.LastScaleTime,
		CurrentReplicas:    in.Status.CurrentReplicas,
		DesiredReplicas:    in.Status.DesiredReplicas,
	}
	current := make([]autoscalingv1.MetricStatus, len(in.Status.CurrentMetrics))
	for i, m := range in.Status.CurrentMetrics {
		if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU &&
			m.Resource.Current.AverageUtilization != nil {
			out.Status.CurrentCPUUtilizationPercentage = m.Resource.Current.AverageUtilization
		}
		current[i] = metricStatusToV1(m)
	}
	conditions := make([]autoscalingv1.HorizontalPodAutoscalerCondition, len(in.Status.Conditions))
	for i, c := range in.Status.Conditions {
		conditions[i] = autoscalingv1.HorizontalPodAutoscalerCondition{Type: autoscalingv1.HorizontalPodAutoscalerConditionType(c.Type),
			Status: c.Status, LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
			ObservedGeneration: c.ObservedGeneration}
	}
	set := func(key string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[key] = string(b)
		return nil
	}
	if len(other) > 0 {
		if err := set(hpaMetricsAnnotation, other); err != nil {
			return nil, err
		}
	}
	if len(current) > 0 {
		if err := set(hpaCurrentMetricsAnnotation, current); err != nil {
			return nil, err
		}
	}
	if in.Spec.Behavior != nil {
		if err := set(hpaBehaviorAnnotation, behaviorToInternal(in.Spec.Behavior)); err != nil {
			return nil, err
		}
	}
	if len(conditions) > 0 {
		if err := set(hpaConditionsAnnotation, conditions); err != nil {
			return nil, err
		}
	}
	out.SetGroupVersionKind(hpaV1GVK)
	return out, nil
}

// hpaToV2 converts an autoscaling/v1 HPA to autoscaling/v2
// (Convert_v1_HorizontalPodAutoscaler_To_autoscaling_HorizontalPodAutoscaler):
// the annotations' metrics, behavior, current metrics and conditions
// read (one that does not parse is ignored, as there) and dropped, 80% of
// CPU when no metric is left. The storage's defaults are not applied.
func hpaToV2(in *autoscalingv1.HorizontalPodAutoscaler) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	in = in.DeepCopy()
	out := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: in.ObjectMeta}
	out.Spec = autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference(in.Spec.ScaleTargetRef),
		MinReplicas:    in.Spec.MinReplicas,
		MaxReplicas:    in.Spec.MaxReplicas,
	}
	if in.Spec.TargetCPUUtilizationPercentage != nil {
		out.Spec.Metrics = []autoscalingv2.MetricSpec{cpuUtilization(*in.Spec.TargetCPUUtilizationPercentage)}
	}
	out.Status = autoscalingv2.HorizontalPodAutoscalerStatus{
		ObservedGeneration: in.Status.ObservedGeneration,
		LastScaleTime:      in.Status.LastScaleTime,
		CurrentReplicas:    in.Status.CurrentReplicas,
		DesiredReplicas:    in.Status.DesiredReplicas,
	}
	if u := in.Status.CurrentCPUUtilizationPercentage; u != nil {
		out.Status.CurrentMetrics = []autoscalingv2.MetricStatus{{Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceCPU,
				Current: autoscalingv2.MetricValueStatus{AverageUtilization: u}}}}
	}
	ann := out.Annotations
	if enc, ok := ann[hpaMetricsAnnotation]; ok {
		var other []autoscalingv1.MetricSpec
		if json.Unmarshal([]byte(enc), &other) == nil {
			metrics := make([]autoscalingv2.MetricSpec, len(other), len(other)+1)
			for i, m := range other {
				metrics[i] = metricSpecToV2(m)
			}
			out.Spec.Metrics = append(metrics, out.Spec.Metrics...)
		}
	}
	if enc, ok := ann[hpaBehaviorAnnotation]; ok {
		var b internalBehavior
		if json.Unmarshal([]byte(enc), &b) == nil && (b.ScaleUp != nil || b.ScaleDown != nil) {
			out.Spec.Behavior = b.toV2()
		}
	}
	if enc, ok := ann[hpaCurrentMetricsAnnotation]; ok {
		var current []autoscalingv1.MetricStatus
		if json.Unmarshal([]byte(enc), &current) == nil {
			out.Status.CurrentMetrics = make([]autoscalingv2.MetricStatus, len(current))
			for i, m := range current {
				out.Status.CurrentMetrics[i] = metricStatusToV2(m)
			}
		}
	}
	if len(out.Spec.Metrics) == 0 {
		out.Spec.Metrics = []autoscalingv2.MetricSpec{cpuUtilization(hpaDefaultCPU)}
	}
	if enc, ok := ann[hpaConditionsAnnotation]; ok {
		var conditions []autoscalingv1.HorizontalPodAutoscalerCondition
		if json.Unmarshal([]byte(enc), &conditions) == nil {
			out.Status.Conditions = make([]autoscalingv2.HorizontalPodAutoscalerCondition, len(conditions))
			for i, c := range conditions {
				out.Status.Conditions[i] = autoscalingv2.HorizontalPodAutoscalerCondition{
					Type: autoscalingv2.HorizontalPodAutoscalerConditionType(c.Type), Status: c.Status,
					LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
					ObservedGeneration: c.ObservedGeneration}
			}
		}
	}
	out.Annotations = dropHPAAnnotations(out.Annotations)
	out.SetGroupVersionKind(hpaV2GVK)
	return out, nil
}

// isCPUUtilization reports whether m is a CPU utilization target: the one
// metric v1 has a field for.
func isCPUUtilization(m autoscalingv2.MetricSpec) bool {
	return m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU &&
		m.Resource.Target.AverageUtilization != nil
}

func cpuUtilization(percent int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &percent}}}
}

// metricSpecToV1 converts a v2 metric to v1's form (the annotation's).
func metricSpecToV1(in autoscalingv2.MetricSpec) autoscalingv1.MetricSpec {
	out := autoscalingv1.MetricSpec{Type: autoscalingv1.MetricSourceType(in.Type)}
	if s := in.Object; s != nil {
		o := &autoscalingv1.ObjectMetricSource{Target: autoscalingv1.CrossVersionObjectReference(s.DescribedObject),
			MetricName: s.Metric.Name, Selector: s.Metric.Selector, AverageValue: s.Target.AverageValue}
		if s.Target.Value != nil {
			o.TargetValue = *s.Target.Value
		}
		out.Object = o
	}
	if s := in.Pods; s != nil {
		p := &autoscalingv1.PodsMetricSource{MetricName: s.Metric.Name, Selector: s.Metric.Selector}
		if s.Target.AverageValue != nil {
			p.TargetAverageValue = *s.Target.AverageValue
		}
		out.Pods = p
	}
	if s := in.Resource; s != nil {
		out.Resource = &autoscalingv1.ResourceMetricSource{Name: s.Name,
			TargetAverageUtilization: s.Target.AverageUtilization, TargetAverageValue: s.Target.AverageValue}
	}
	if s := in.ContainerResource; s != nil {
		out.ContainerResource = &autoscalingv1.ContainerResourceMetricSource{Name: s.Name, Container: s.Container,
			TargetAverageUtilization: s.Target.AverageUtilization, TargetAverageValue: s.Target.AverageValue}
	}
	if s := in.External; s != nil {
		out.External = &autoscalingv1.ExternalMetricSource{MetricName: s.Metric.Name, MetricSelector: s.Metric.Selector,
			TargetValue: s.Target.Value, TargetAverageValue: s.Target.AverageValue}
	}
	return out
}

// metricSpecToV2 converts a v1 metric (of the annotation) to v2's form.
func metricSpecToV2(in autoscalingv1.MetricSpec) autoscalingv2.MetricSpec {
	out := autoscalingv2.MetricSpec{Type: autoscalingv2.MetricSourceType(in.Type)}
	if s := in.Object; s != nil {
		t := autoscalingv2.ValueMetricType
		if s.AverageValue != nil {
			t = autoscalingv2.AverageValueMetricType
		}
		v := s.TargetValue
		out.Object = &autoscalingv2.ObjectMetricSource{DescribedObject: autoscalingv2.CrossVersionObjectReference(s.Target),
			Metric: autoscalingv2.MetricIdentifier{Name: s.MetricName, Selector: s.Selector},
			Target: autoscalingv2.MetricTarget{Type: t, Value: &v, AverageValue: s.AverageValue}}
	}
	if s := in.Pods; s != nil {
		v := s.TargetAverageValue
		out.Pods = &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: s.MetricName, Selector: s.Selector},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &v}}
	}
	if s := in.Resource; s != nil {
		out.Resource = &autoscalingv2.ResourceMetricSource{Name: s.Name,
			Target: resourceTarget(s.TargetAverageUtilization, s.TargetAverageValue)}
	}
	if s := in.ContainerResource; s != nil {
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricSource{Name: s.Name, Container: s.Container,
			Target: resourceTarget(s.TargetAverageUtilization, s.TargetAverageValue)}
	}
	if s := in.External; s != nil {
		t := autoscalingv2.AverageValueMetricType
		if s.TargetValue != nil {
			t = autoscalingv2.ValueMetricType
		}
		out.External = &autoscalingv2.ExternalMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: s.MetricName, Selector: s.MetricSelector},
			Target: autoscalingv2.MetricTarget{Type: t, Value: s.TargetValue, AverageValue: s.TargetAverageValue}}
	}
	return out
}

// resourceTarget is a (container) resource metric's v2 target: a
// utilization when v1 names one, else an average value.
func resourceTarget(utilization *int32, average *resource.Quantity) autoscalingv2.MetricTarget {
	t := autoscalingv2.AverageValueMetricType
	if utilization != nil {
		t = autoscalingv2.UtilizationMetricType
	}
	return autoscalingv2.MetricTarget{Type: t, AverageUtilization: utilization, AverageValue: average}
}

// metricStatusToV1 converts a v2 current metric to v1's form.
func metricStatusToV1(in autoscalingv2.MetricStatus) autoscalingv1.MetricStatus {
	out := autoscalingv1.MetricStatus{Type: autoscalingv1.MetricSourceType(in.Type)}
	val := func(q *resource.Quantity) resource.Quantity {
		if q == nil {
			return resource.Quantity{}
		}
		return *q
	}
	if s := in.Object; s != nil {
		out.Object = &autoscalingv1.ObjectMetricStatus{Target: autoscalingv1.CrossVersionObjectReference(s.DescribedObject),
			MetricName: s.Metric.Name, Selector: s.Metric.Selector, CurrentValue: val(s.Current.Value), AverageValue: s.Current.AverageValue}
	}
	if s := in.Pods; s != nil {
		out.Pods = &autoscalingv1.PodsMetricStatus{MetricName: s.Metric.Name, Selector: s.Metric.Selector,
			CurrentAverageValue: val(s.Current.AverageValue)}
	}
	if s := in.Resource; s != nil {
		out.Resource = &autoscalingv1.ResourceMetricStatus{Name: s.Name,
			CurrentAverageUtilization: s.Current.AverageUtilization, CurrentAverageValue: val(s.Current.AverageValue)}
	}
	if s := in.ContainerResource; s != nil {
		out.ContainerResource = &autoscalingv1.ContainerResourceMetricStatus{Name: s.Name, Container: s.Container,
			CurrentAverageUtilization: s.Current.AverageUtilization, CurrentAverageValue: val(s.Current.AverageValue)}
	}
	if s := in.External; s != nil {
		out.External = &autoscalingv1.ExternalMetricStatus{MetricName: s.Metric.Name, MetricSelector: s.Metric.Selector,
			CurrentValue: val(s.Current.Value), CurrentAverageValue: s.Current.AverageValue}
	}
	return out
}

// metricStatusToV2 converts a v1 current metric (of the annotation) to
// v2's form.
func metricStatusToV2(in autoscalingv1.MetricStatus) autoscalingv2.MetricStatus {
	out := autoscalingv2.MetricStatus{Type: autoscalingv2.MetricSourceType(in.Type)}
	if s := in.Object; s != nil {
		v := s.CurrentValue
		out.Object = &autoscalingv2.ObjectMetricStatus{DescribedObject: autoscalingv2.CrossVersionObjectReference(s.Target),
			Metric:  autoscalingv2.MetricIdentifier{Name: s.MetricName, Selector: s.Selector},
			Current: autoscalingv2.MetricValueStatus{Value: &v, AverageValue: s.AverageValue}}
	}
	if s := in.Pods; s != nil {
		v := s.CurrentAverageValue
		out.Pods = &autoscalingv2.PodsMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: s.MetricName, Selector: s.Selector},
			Current: autoscalingv2.MetricValueStatus{AverageValue: &v}}
	}
	if s := in.Resource; s != nil {
		v := s.CurrentAverageValue
		out.Resource = &autoscalingv2.ResourceMetricStatus{Name: s.Name,
			Current: autoscalingv2.MetricValueStatus{AverageValue: &v, AverageUtilization: s.CurrentAverageUtilization}}
	}
	if s := in.ContainerResource; s != nil {
		v := s.CurrentAverageValue
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricStatus{Name: s.Name, Container: s.Container,
			Current: autoscalingv2.MetricValueStatus{AverageValue: &v, AverageUtilization: s.CurrentAverageUtilization}}
	}
	if s := in.External; s != nil {
		v := s.CurrentValue
		out.External = &autoscalingv2.ExternalMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: s.MetricName, Selector: s.MetricSelector},
			Current: autoscalingv2.MetricValueStatus{Value: &v, AverageValue: s.CurrentAverageValue}}
	}
	return out
}

// internalBehavior is the internal HorizontalPodAutoscalerBehavior as
// encoding/json writes it (the annotation's form: Go field names, in
// their order, no omitted members).
type internalBehavior struct {
	ScaleUp   *internalScalingRules
	ScaleDown *internalScalingRules
}

type internalScalingRules struct {
	StabilizationWindowSeconds *int32
	SelectPolicy               *autoscalingv2.ScalingPolicySelect
	Policies                   []internalScalingPolicy
	Tolerance                  *resource.Quantity
}

type internalScalingPolicy struct {
	Type          autoscalingv2.HPAScalingPolicyType
	Value         int32
	PeriodSeconds int32
}

func behaviorToInternal(b *autoscalingv2.HorizontalPodAutoscalerBehavior) internalBehavior {
	return internalBehavior{ScaleUp: rulesToInternal(b.ScaleUp), ScaleDown: rulesToInternal(b.ScaleDown)}
}

func rulesToInternal(r *autoscalingv2.HPAScalingRules) *internalScalingRules {
	if r == nil {
		return nil
	}
	out := &internalScalingRules{StabilizationWindowSeconds: r.StabilizationWindowSeconds, SelectPolicy: r.SelectPolicy,
		Tolerance: r.Tolerance}
	if r.Policies != nil {
		out.Policies = make([]internalScalingPolicy, len(r.Policies))
		for i, p := range r.Policies {
			out.Policies[i] = internalScalingPolicy(p)
		}
	}
	return out
}

func (b internalBehavior) toV2() *autoscalingv2.HorizontalPodAutoscalerBehavior {
	return &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: b.ScaleUp.toV2(), ScaleDown: b.ScaleDown.toV2()}
}

func (r *internalScalingRules) toV2() *autoscalingv2.HPAScalingRules {
	if r == nil {
		return nil
	}
	out := &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: r.StabilizationWindowSeconds, SelectPolicy: r.SelectPolicy,
		Tolerance: r.Tolerance}
	if r.Policies != nil {
		out.Policies = make([]autoscalingv2.HPAScalingPolicy, len(r.Policies))
		for i, p := range r.Policies {
			out.Policies[i] = autoscalingv2.HPAScalingPolicy(p)
		}
	}
	return out
}
