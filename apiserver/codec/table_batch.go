package codec

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	batchv1beta1 "k8s.io/api/batch/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
)

// The Job and CronJob printers of kube-apiserver v1.33 (printJob,
// printCronJob).

func init() {
	jobSelector := metav1.TableColumnDefinition{Name: "Selector", Type: "string", Priority: 1, Description: batchv1.JobSpec{}.SwaggerDoc()["selector"]}
	printers[schema.GroupKind{Group: "batch", Kind: "Job"}] = printer{
		columns: []metav1.TableColumnDefinition{colName,
			col("Status", "Status of the job."),
			col("Completions", batchv1.JobStatus{}.SwaggerDoc()["succeeded"]),
			col("Duration", "Time required to complete the job."),
			colAge, colContainers, colImages, jobSelector},
		cells: func(o runtime.Object, now time.Time) []any { return jobCells(o.(*batchv1.Job), now) },
	}
	cronSpec, cronStatus := batchv1beta1.CronJobSpec{}.SwaggerDoc(), batchv1beta1.CronJobStatus{}.SwaggerDoc()
	printers[schema.GroupKind{Group: "batch", Kind: "CronJob"}] = printer{
		columns: []metav1.TableColumnDefinition{colName,
			col("Schedule", cronSpec["schedule"]),
			col("Timezone", cronSpec["timeZone"]),
			{Name: "Suspend", Type: "boolean", Description: cronSpec["suspend"]},
			{Name: "Active", Type: "integer", Description: cronStatus["active"]},
			col("Last Schedule", cronStatus["lastScheduleTime"]),
			colAge, colContainers, colImages, jobSelector},
		cells: func(o runtime.Object, now time.Time) []any {
			cj := o.(*batchv1.CronJob)
			last := "<none>"
			if cj.Status.LastScheduleTime != nil {
				last = age(*cj.Status.LastScheduleTime, now)
			}
			tz := "<none>"
			if cj.Spec.TimeZone != nil {
				tz = *cj.Spec.TimeZone
			}
			names, images := containerCells(cj.Spec.JobTemplate.Spec.Template.Spec.Containers)
			return []any{cj.Name, cj.Spec.Schedule, tz, boolPtrCell(cj.Spec.Suspend), int64(len(cj.Status.Active)), last,
				age(cj.CreationTimestamp, now), names, images, metav1.FormatLabelSelector(cj.Spec.JobTemplate.Spec.Selector)}
		},
	}
}

// jobCondition is the status of the first condition of type t being True.
func jobCondition(cs []batchv1.JobCondition, t batchv1.JobConditionType) bool {
	for _, c := range cs {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func jobCells(j *batchv1.Job, now time.Time) []any {
	var completions string
	switch p := replicas(j.Spec.Parallelism); {
	case j.Spec.Completions != nil:
		completions = fmt.Sprintf("%d/%d", j.Status.Succeeded, *j.Spec.Completions)
	case p > 1:
		completions = fmt.Sprintf("%d/1 of %d", j.Status.Succeeded, p)
	default:
		completions = fmt.Sprintf("%d/1", j.Status.Succeeded)
	}
	var took string
	switch {
	case j.Status.StartTime == nil:
	case j.Status.CompletionTime == nil:
		took = duration.HumanDuration(now.Sub(j.Status.StartTime.Time))
	default:
		took = duration.HumanDuration(j.Status.CompletionTime.Sub(j.Status.StartTime.Time))
	}
	status := "Running"
	switch cs := j.Status.Conditions; {
	case jobCondition(cs, batchv1.JobComplete):
		status = "Complete"
	case jobCondition(cs, batchv1.JobFailed):
		status = "Failed"
	case j.DeletionTimestamp != nil:
		status = "Terminating"
	case jobCondition(cs, batchv1.JobSuspended):
		status = "Suspended"
	case jobCondition(cs, batchv1.JobFailureTarget):
		status = "FailureTarget"
	}
	names, images := containerCells(j.Spec.Template.Spec.Containers)
	return []any{j.Name, status, completions, took, age(j.CreationTimestamp, now), names, images, metav1.FormatLabelSelector(j.Spec.Selector)}
}
