package codec

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// events.k8s.io's Events are core's (one storage): kube-apiserver v1.33
// prints them with printEvent after the events/v1 conversion, reproduced
// by coreEvent.

func init() {
	core := printers[schema.GroupKind{Kind: "Event"}]
	printers[schema.GroupKind{Group: "events.k8s.io", Kind: "Event"}] = printer{
		columns: core.columns,
		cells: func(o runtime.Object, now time.Time) []any {
			return eventCells(coreEvent(o.(*eventsv1.Event)), now)
		},
	}
}

// coreEvent is ev as core/v1 words it (Convert_v1_Event_To_core_Event).
func coreEvent(ev *eventsv1.Event) *corev1.Event {
	out := &corev1.Event{
		ObjectMeta:          ev.ObjectMeta,
		InvolvedObject:      ev.Regarding,
		Reason:              ev.Reason,
		Message:             ev.Note,
		Source:              ev.DeprecatedSource,
		FirstTimestamp:      ev.DeprecatedFirstTimestamp,
		LastTimestamp:       ev.DeprecatedLastTimestamp,
		Count:               ev.DeprecatedCount,
		Type:                ev.Type,
		EventTime:           ev.EventTime,
		Action:              ev.Action,
		Related:             ev.Related,
		ReportingController: ev.ReportingController,
		ReportingInstance:   ev.ReportingInstance,
	}
	if ev.Series != nil {
		out.Series = &corev1.EventSeries{Count: ev.Series.Count, LastObservedTime: ev.Series.LastObservedTime}
	}
	return out
}
