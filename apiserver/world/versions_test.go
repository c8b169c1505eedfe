package world

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/frame"
)

var convTime = metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))

// TestEventConversionRoundTrip converts Events both ways: every field of
// one version lands in its counterpart and comes back unchanged.
func TestEventConversionRoundTrip(t *testing.T) {
	core := &corev1.Event{
		TypeMeta:       metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta:     metav1.ObjectMeta{Name: "e", Namespace: "ns", Labels: map[string]string{"a": "1"}},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "p", UID: "u", FieldPath: "spec.containers{c}"},
		Reason:         "Pulled", Message: "pulled it", Type: "Normal",
		Source:         corev1.EventSource{Component: "kubelet", Host: "node-1"},
		FirstTimestamp: convTime, LastTimestamp: convTime, Count: 3,
		EventTime: metav1.NewMicroTime(convTime.Time),
		Series:    &corev1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(convTime.Time)},
		Action:    "Pull", Related: &corev1.ObjectReference{Kind: "Node", Name: "node-1"},
		ReportingController: "kubelet", ReportingInstance: "node-1",
	}
	ev := eventToEventsV1(core)
	want := &eventsv1.Event{
		TypeMeta:   metav1.TypeMeta{APIVersion: "events.k8s.io/v1", Kind: "Event"},
		ObjectMeta: core.ObjectMeta, EventTime: core.EventTime,
		Series:              &eventsv1.EventSeries{Count: 2, LastObservedTime: core.Series.LastObservedTime},
		ReportingController: "kubelet", ReportingInstance: "node-1", Action: "Pull", Reason: "Pulled",
		Regarding: core.InvolvedObject, Related: core.Related, Note: "pulled it", Type: "Normal",
		DeprecatedSource: core.Source, DeprecatedFirstTimestamp: convTime, DeprecatedLastTimestamp: convTime, DeprecatedCount: 3,
	}
	if !reflect.DeepEqual(ev, want) {
		t.Errorf("core to events.k8s.io:\n%+v\nwant\n%+v", ev, want)
	}
	if back := eventToCoreV1(ev); !reflect.DeepEqual(back, core) {
		t.Errorf("round trip:\n%+v\nwant\n%+v", back, core)
	}
}

func hpaV2(spec autoscalingv2.HorizontalPodAutoscalerSpec, status autoscalingv2.HorizontalPodAutoscalerStatus) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{TypeMeta: metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: metav1.ObjectMeta{Name: "h", Namespace: "ns", Annotations: map[string]string{"keep": "me"}},
		Spec:       spec, Status: status}
}

var scaleTarget = autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "d"}

// TestHPAToV1Annotations converts autoscaling/v2 HPAs to v1: the CPU
// target is v1's field, what v1 has no field for is in its annotations
// (the apiserver's JSON: v1 metric types, the internal behavior's Go field
// names), and converting back gives the v2 object.
func TestHPAToV1Annotations(t *testing.T) {
	mem := resource.MustParse("100Mi")
	for _, tc := range []struct {
		name        string
		in          *autoscalingv2.HorizontalPodAutoscaler
		cpu         *int32
		annotations map[string]string
	}{
		{name: "cpu only", in: hpaV2(autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: scaleTarget, MinReplicas: ptr.To[int32](1), MaxReplicas: 3,
			Metrics: []autoscalingv2.MetricSpec{cpuUtilization(50)}}, autoscalingv2.HorizontalPodAutoscalerStatus{}),
			cpu: ptr.To[int32](50), annotations: map[string]string{"keep": "me"}},
		{name: "memory, behavior, status", in: hpaV2(autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: scaleTarget, MinReplicas: ptr.To[int32](1), MaxReplicas: 3,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceMemory,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &mem}}}, cpuUtilization(60)},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](60),
				SelectPolicy: ptr.To(autoscalingv2.MinChangePolicySelect), Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 30}}}}},
			autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 2, DesiredReplicas: 2,
				CurrentMetrics: []autoscalingv2.MetricStatus{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceCPU,
					Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To[int32](40), AverageValue: ptr.To(resource.MustParse("20m"))}}}},
				Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue,
					LastTransitionTime: convTime, Reason: "ReadyForNewScale", Message: "ok"}}}),
			cpu: ptr.To[int32](60), annotations: map[string]string{"keep": "me",
				hpaMetricsAnnotation:        `[{"type":"Resource","resource":{"name":"memory","targetAverageValue":"100Mi"}}]`,
				hpaBehaviorAnnotation:       `{"ScaleUp":null,"ScaleDown":{"StabilizationWindowSeconds":60,"SelectPolicy":"Min","Policies":[{"Type":"Pods","Value":1,"PeriodSeconds":30}],"Tolerance":null}}`,
				hpaCurrentMetricsAnnotation: `[{"type":"Resource","resource":{"name":"cpu","currentAverageUtilization":40,"currentAverageValue":"20m"}}]`,
				hpaConditionsAnnotation:     `[{"type":"AbleToScale","status":"True","lastTransitionTime":"2026-12-01T10:00:00Z","reason":"ReadyForNewScale","message":"ok"}]`,
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v1, err := hpaToV1(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(v1.Spec.TargetCPUUtilizationPercentage, tc.cpu) {
				t.Errorf("targetCPUUtilizationPercentage %v, want %v", v1.Spec.TargetCPUUtilizationPercentage, tc.cpu)
			}
			if !reflect.DeepEqual(v1.Annotations, tc.annotations) {
				t.Errorf("annotations\n%q\nwant\n%q", v1.Annotations, tc.annotations)
			}
			back, err := hpaToV2(v1)
			if err != nil {
				t.Fatal(err)
			}
			// (v1's own metric comes back after the annotation's others:
			// where the cases have it.)
			wantBack := tc.in.DeepCopy()
			if !equalJSON(t, back, wantBack) {
				t.Errorf("round trip\n%s\nwant\n%s", mustJSON(t, back), mustJSON(t, wantBack))
			}
		})
	}
}

// TestHPAToV2 converts autoscaling/v1 HPAs: the CPU target is a Resource
// metric, no target at all the 80% default, round-trip annotations are
// read and dropped, and one that does not parse is ignored (and dropped).
func TestHPAToV2(t *testing.T) {
	for _, tc := range []struct {
		name        string
		spec        autoscalingv1.HorizontalPodAutoscalerSpec
		annotations map[string]string
		metrics     []autoscalingv2.MetricSpec
		behavior    bool
	}{
		{name: "cpu", spec: autoscalingv1.HorizontalPodAutoscalerSpec{MaxReplicas: 3, TargetCPUUtilizationPercentage: ptr.To[int32](50)},
			metrics: []autoscalingv2.MetricSpec{cpuUtilization(50)}},
		{name: "default", spec: autoscalingv1.HorizontalPodAutoscalerSpec{MaxReplicas: 3},
			metrics: []autoscalingv2.MetricSpec{cpuUtilization(80)}},
		{name: "annotated", spec: autoscalingv1.HorizontalPodAutoscalerSpec{MaxReplicas: 3, TargetCPUUtilizationPercentage: ptr.To[int32](50)},
			annotations: map[string]string{hpaMetricsAnnotation: `[{"type":"Pods","pods":{"metricName":"qps","targetAverageValue":"10"}}]`,
				hpaBehaviorAnnotation: `{"ScaleUp":{"StabilizationWindowSeconds":0,"SelectPolicy":"Max","Policies":null,"Tolerance":null},"ScaleDown":null}`},
			metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "qps"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("10"))}}},
				cpuUtilization(50)},
			behavior: true},
		{name: "broken annotation", spec: autoscalingv1.HorizontalPodAutoscalerSpec{MaxReplicas: 3},
			annotations: map[string]string{hpaMetricsAnnotation: `not json`, "other": "x"},
			metrics:     []autoscalingv2.MetricSpec{cpuUtilization(80)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "h", Annotations: tc.annotations}, Spec: tc.spec}
			out, err := hpaToV2(in)
			if err != nil {
				t.Fatal(err)
			}
			if !equalJSON(t, out.Spec.Metrics, tc.metrics) {
				t.Errorf("metrics %s, want %s", mustJSON(t, out.Spec.Metrics), mustJSON(t, tc.metrics))
			}
			if (out.Spec.Behavior != nil) != tc.behavior {
				t.Errorf("behavior %v, want one: %v", out.Spec.Behavior, tc.behavior)
			}
			for k := range out.Annotations {
				if k != "other" {
					t.Errorf("annotation %s kept", k)
				}
			}
		})
	}
}

// TestConvertTo converts stored objects between the versions of one
// storage in each format, and leaves other kinds and metadata-only views
// alone.
func TestConvertTo(t *testing.T) {
	core := &corev1.Event{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns"}, Message: "m", InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p"}}
	for _, f := range []frame.Format{frame.JSON, frame.Protobuf, frame.CBOR} {
		o, err := codec.Encode(core.DeepCopy(), f)
		if err != nil {
			t.Fatal(err)
		}
		out, converted, err := convertTo(o, eventsEventGVK)
		if err != nil || !converted || out.Format != f || out.APIVersion != "events.k8s.io/v1" {
			t.Fatalf("%v: converted %v, %s %v, err %v", f, converted, out.APIVersion, out.Format, err)
		}
		obj, err := codec.Decode(out)
		if err != nil {
			t.Fatal(err)
		}
		if ev := obj.(*eventsv1.Event); ev.Note != "m" || ev.Regarding.Name != "p" {
			t.Errorf("%v: %+v", f, ev)
		}
	}
	cm, _ := codec.Encode(&corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}}, frame.JSON)
	partial := codec.Object{Format: frame.JSON, APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata", Raw: []byte(`{}`)}
	for _, o := range []codec.Object{cm, partial} {
		if _, converted, err := convertTo(o, eventsEventGVK); converted || err != nil {
			t.Errorf("%s converted (%v)", o.Kind, err)
		}
	}
}

// TestRoundTrip stores a v1 HPA as the apiserver's round trip through
// autoscaling/v2 makes it: its behavior annotation defaulted as the
// storage's decoder defaults it, the storage's own kinds untouched.
func TestRoundTrip(t *testing.T) {
	in := &autoscalingv1.HorizontalPodAutoscaler{TypeMeta: metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: metav1.ObjectMeta{Name: "h", Annotations: map[string]string{
			hpaBehaviorAnnotation: `{"ScaleUp":{"StabilizationWindowSeconds":30}}`}},
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{MaxReplicas: 3, TargetCPUUtilizationPercentage: ptr.To[int32](50)}}
	out, err := roundTrip(in, hpaV2GVK)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*autoscalingv1.HorizontalPodAutoscaler)
	want := `{"ScaleUp":{"StabilizationWindowSeconds":30,"SelectPolicy":"Max","Policies":[{"Type":"Pods","Value":4,"PeriodSeconds":15},{"Type":"Percent","Value":100,"PeriodSeconds":15}],"Tolerance":null},` +
		`"ScaleDown":{"StabilizationWindowSeconds":null,"SelectPolicy":"Max","Policies":[{"Type":"Percent","Value":100,"PeriodSeconds":15}],"Tolerance":null}}`
	if b := got.Annotations[hpaBehaviorAnnotation]; b != want {
		t.Errorf("behavior annotation\n%s\nwant\n%s", b, want)
	}
	if got.Spec.MinReplicas == nil || *got.Spec.MinReplicas != 1 || got.GetObjectKind().GroupVersionKind() != hpaV1GVK {
		t.Errorf("round trip: %+v", got)
	}
	v2 := hpaV2(autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 3}, autoscalingv2.HorizontalPodAutoscalerStatus{})
	if same, err := roundTrip(v2, hpaV2GVK); err != nil || same != runtime.Object(v2) {
		t.Errorf("the storage's version round-tripped: %v", err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func equalJSON(t *testing.T, a, b any) bool { return mustJSON(t, a) == mustJSON(t, b) }

// TestConvertUnstructured converts an unstructured object (the field
// manager's form) as its typed form.
func TestConvertUnstructured(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
		"metadata": map[string]any{"name": "h"}, "spec": map[string]any{"maxReplicas": int64(3), "targetCPUUtilizationPercentage": int64(70)}}}
	out, err := convertObject(u, hpaV2GVK)
	if err != nil {
		t.Fatal(err)
	}
	h, ok := out.(*autoscalingv2.HorizontalPodAutoscaler)
	if !ok || !equalJSON(t, h.Spec.Metrics, []autoscalingv2.MetricSpec{cpuUtilization(70)}) || h.GetObjectKind().GroupVersionKind() != hpaV2GVK {
		t.Errorf("%T %+v", out, out)
	}
}
