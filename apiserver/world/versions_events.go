package world

import (
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
)

// Core v1 Events and events.k8s.io/v1 Events are one storage (core's):
// the conversions of pkg/apis/events/v1/conversion.go, field by field.
// Both directions keep every field: involvedObject is regarding, message
// note, source deprecatedSource, firstTimestamp, lastTimestamp and count
// the deprecated ones; the rest share their names.

// eventToEventsV1 converts a core v1 Event to events.k8s.io/v1.
func eventToEventsV1(in *corev1.Event) *eventsv1.Event {
	in = in.DeepCopy()
	out := &eventsv1.Event{
		ObjectMeta:               in.ObjectMeta,
		EventTime:                in.EventTime,
		ReportingController:      in.ReportingController,
		ReportingInstance:        in.ReportingInstance,
		Action:                   in.Action,
		Reason:                   in.Reason,
		Regarding:                in.InvolvedObject,
		Related:                  in.Related,
		Note:                     in.Message,
		Type:                     in.Type,
		DeprecatedSource:         in.Source,
		DeprecatedFirstTimestamp: in.FirstTimestamp,
		DeprecatedLastTimestamp:  in.LastTimestamp,
		DeprecatedCount:          in.Count,
	}
	if in.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	out.SetGroupVersionKind(eventsEventGVK)
	return out
}

// eventToCoreV1 converts an events.k8s.io/v1 Event to core v1.
func eventToCoreV1(in *eventsv1.Event) *corev1.Event {
	in = in.DeepCopy()
	out := &corev1.Event{
		ObjectMeta:          in.ObjectMeta,
		InvolvedObject:      in.Regarding,
		Reason:              in.Reason,
		Message:             in.Note,
		Source:              in.DeprecatedSource,
		FirstTimestamp:      in.DeprecatedFirstTimestamp,
		LastTimestamp:       in.DeprecatedLastTimestamp,
		Count:               in.DeprecatedCount,
		Type:                in.Type,
		EventTime:           in.EventTime,
		Action:              in.Action,
		Related:             in.Related,
		ReportingController: in.ReportingController,
		ReportingInstance:   in.ReportingInstance,
	}
	if in.Series != nil {
		out.Series = &corev1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	out.SetGroupVersionKind(coreEventGVK)
	return out
}
