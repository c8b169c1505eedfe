package world

import (
	"encoding/json"
	"fmt"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/wtrace/wtrace/apiserver/codec"
)

// kube-apiserver's API Priority and Fairness configuration controller
// (k8s.io/apiserver/pkg/util/flowcontrol, apf_controller.go) keeps each
// FlowSchema's Dangling condition saying whether the
// PriorityLevelConfiguration it names exists: a server-side apply of the
// status, forced, by its own field manager, moments after the write that
// changed it. The world writes it right after a client's write of a
// FlowSchema or a PriorityLevelConfiguration (the answer to that write is
// the object before it, as the apiserver's is); the changes a session
// recorded bring their own.

// apfManager is the field manager of the APF configuration controller.
const apfManager = "api-priority-and-fairness-config-consumer-v1"

var (
	flowSchemas    = Resource{Group: flowcontrolv1.GroupName, Version: "v1", Resource: "flowschemas"}
	priorityLevels = Resource{Group: flowcontrolv1.GroupName, Version: "v1", Resource: "prioritylevelconfigurations"}
)

// afterWrite runs what kube-apiserver's own controllers do after a
// client's write of the object named key in h (the lock is held): the
// APF configuration controller's, then the CRD naming and establishing
// controllers' (afterStore).
func (s *Store) afterWrite(h *history, key Key) {
	switch r := h.info.Resource; r {
	case flowSchemas:
		s.syncDangling(&key)
	case priorityLevels:
		s.syncDangling(nil)
	default:
		s.afterStore(h, r, key)
	}
}

// syncDangling brings the Dangling condition of one FlowSchema (key), or
// of every one (nil), up to date (the lock is held).
func (s *Store) syncDangling(key *Key) {
	h, ok := s.res[flowSchemas]
	if !ok {
		return
	}
	exists := map[string]bool{}
	for _, o := range s.currentOf(priorityLevels) {
		if pl, ok := o.(*flowcontrolv1.PriorityLevelConfiguration); ok {
			exists[pl.Name] = true
		}
	}
	keys := sortedKeys(h.objs)
	if key != nil {
		keys = []Key{*key}
	}
	for _, k := range keys {
		e := s.current(h, k)
		if e == nil {
			continue
		}
		obj, err := codec.Decode(e.obj)
		fs, ok := obj.(*flowcontrolv1.FlowSchema)
		if err != nil || !ok || fs.DeletionTimestamp != nil {
			continue
		}
		want := danglingCondition(fs.Spec.PriorityLevelConfiguration.Name, exists[fs.Spec.PriorityLevelConfiguration.Name])
		if have := findDangling(fs); have != nil && have.Status == want.Status && have.Reason == want.Reason && have.Message == want.Message {
			continue
		}
		want.LastTransitionTime = s.timeNow()
		patch, err := json.Marshal(map[string]any{
			"apiVersion": flowcontrolv1.SchemeGroupVersion.String(), "kind": "FlowSchema",
			"metadata": map[string]any{"name": fs.Name},
			"status":   map[string]any{"conditions": []flowcontrolv1.FlowSchemaCondition{want}},
		})
		if err != nil {
			continue
		}
		applied, err := s.apply(patch, fs, h.info.GVK(), "status", writeParams{manager: apfManager, force: true})
		if err != nil || apiequality.Semantic.DeepEqual(applied, obj) {
			continue
		}
		_, _ = s.store(h, k, applied, Modified)
	}
}

// danglingCondition is the condition the controller wants of a
// FlowSchema naming priority level pl (found: it exists).
func danglingCondition(pl string, found bool) flowcontrolv1.FlowSchemaCondition {
	if found {
		return flowcontrolv1.FlowSchemaCondition{Type: flowcontrolv1.FlowSchemaConditionDangling, Status: flowcontrolv1.ConditionFalse,
			Reason: "Found", Message: fmt.Sprintf("This FlowSchema references the PriorityLevelConfiguration object named %q and it exists", pl)}
	}
	return flowcontrolv1.FlowSchemaCondition{Type: flowcontrolv1.FlowSchemaConditionDangling, Status: flowcontrolv1.ConditionTrue,
		Reason: "NotFound", Message: fmt.Sprintf("This FlowSchema references the PriorityLevelConfiguration object named %q but there is no such object", pl)}
}

func findDangling(fs *flowcontrolv1.FlowSchema) *flowcontrolv1.FlowSchemaCondition {
	for i := range fs.Status.Conditions {
		if fs.Status.Conditions[i].Type == flowcontrolv1.FlowSchemaConditionDangling {
			return &fs.Status.Conditions[i]
		}
	}
	return nil
}
