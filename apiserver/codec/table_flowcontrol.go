package codec

import (
	"sort"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The FlowSchema and PriorityLevelConfiguration printers of kube-apiserver
// v1.33 (printFlowSchema, printFlowSchemaList, which orders a list by
// matching precedence then name, printPriorityLevelConfiguration).

func init() {
	const group = "flowcontrol.apiserver.k8s.io"
	fsSpec := flowcontrolv1.FlowSchemaSpec{}.SwaggerDoc()
	printers[schema.GroupKind{Group: group, Kind: "FlowSchema"}] = printer{
		columns: []metav1.TableColumnDefinition{colName,
			col("PriorityLevel", flowcontrolv1.PriorityLevelConfigurationReference{}.SwaggerDoc()["name"]),
			col("MatchingPrecedence", fsSpec["matchingPrecedence"]),
			col("DistinguisherMethod", fsSpec["distinguisherMethod"]),
			colAge,
			col("MissingPL", "references a broken or non-existent PriorityLevelConfiguration")},
		cells: func(o runtime.Object, now time.Time) []any {
			fs := o.(*flowcontrolv1.FlowSchema)
			method := "<none>"
			if fs.Spec.DistinguisherMethod != nil {
				method = string(fs.Spec.DistinguisherMethod.Type)
			}
			missing := "?"
			for _, c := range fs.Status.Conditions {
				if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
					missing = string(c.Status)
					break
				}
			}
			return []any{fs.Name, fs.Spec.PriorityLevelConfiguration.Name, int64(fs.Spec.MatchingPrecedence), method,
				age(fs.CreationTimestamp, now), missing}
		},
		order: func(objs []runtime.Object) {
			sort.SliceStable(objs, func(i, j int) bool {
				a, aok := objs[i].(*flowcontrolv1.FlowSchema)
				b, bok := objs[j].(*flowcontrolv1.FlowSchema)
				if !aok || !bok {
					return false
				}
				if a.Spec.MatchingPrecedence != b.Spec.MatchingPrecedence {
					return a.Spec.MatchingPrecedence < b.Spec.MatchingPrecedence
				}
				return a.Name < b.Name
			})
		},
	}
	queuing := flowcontrolv1.QueuingConfiguration{}.SwaggerDoc()
	printers[schema.GroupKind{Group: group, Kind: "PriorityLevelConfiguration"}] = printer{
		columns: []metav1.TableColumnDefinition{colName,
			col("Type", flowcontrolv1.PriorityLevelConfigurationSpec{}.SwaggerDoc()["type"]),
			col("NominalConcurrencyShares", flowcontrolv1.LimitedPriorityLevelConfiguration{}.SwaggerDoc()["nominalConcurrencyShares"]),
			col("Queues", queuing["queues"]),
			col("HandSize", queuing["handSize"]),
			col("QueueLengthLimit", queuing["queueLengthLimit"]),
			colAge},
		cells: func(o runtime.Object, now time.Time) []any {
			pl := o.(*flowcontrolv1.PriorityLevelConfiguration)
			var ncs, queues, handSize, queueLengthLimit any = "<none>", "<none>", "<none>", "<none>"
			if l := pl.Spec.Limited; l != nil {
				ncs = int64(0)
				if l.NominalConcurrencyShares != nil {
					ncs = int64(*l.NominalConcurrencyShares)
				}
				if q := l.LimitResponse.Queuing; q != nil {
					queues, handSize, queueLengthLimit = int64(q.Queues), int64(q.HandSize), int64(q.QueueLengthLimit)
				}
			}
			return []any{pl.Name, string(pl.Spec.Type), ncs, queues, handSize, queueLengthLimit, age(pl.CreationTimestamp, now)}
		},
	}
}
