package world

import (
	"math"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The defaults kube-apiserver v1.33's decoder sets in Jobs and CronJobs
// (k8s.io/kubernetes/pkg/apis/batch/v1/defaults.go, JobPodReplacementPolicy
// on), and in their pod templates.

// defaultJob is SetDefaults_Job: one completion and one Pod at a time
// when neither is set, 6 retries (unlimited with a limit per index), the
// template's labels when the Job has none, non-indexed, not suspended,
// replacement once a Pod is terminating or failed (failed with a pod
// failure policy), the selector generated.
func defaultJob(j *batchv1.Job) {
	s := &j.Spec
	if s.Completions == nil && s.Parallelism == nil {
		s.Completions = ptr.To[int32](1)
	}
	if s.Parallelism == nil {
		s.Parallelism = ptr.To[int32](1)
	}
	if s.BackoffLimit == nil {
		if s.BackoffLimitPerIndex != nil {
			s.BackoffLimit = ptr.To[int32](math.MaxInt32)
		} else {
			s.BackoffLimit = ptr.To[int32](6)
		}
	}
	if l := s.Template.Labels; l != nil && len(j.Labels) == 0 {
		j.Labels = l
	}
	if s.CompletionMode == nil {
		s.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
	}
	if s.Suspend == nil {
		s.Suspend = ptr.To(false)
	}
	if s.PodFailurePolicy != nil {
		for _, r := range s.PodFailurePolicy.Rules {
			for i := range r.OnPodConditions {
				if r.OnPodConditions[i].Status == "" {
					r.OnPodConditions[i].Status = corev1.ConditionTrue
				}
			}
		}
	}
	if s.PodReplacementPolicy == nil {
		if s.PodFailurePolicy != nil {
			s.PodReplacementPolicy = ptr.To(batchv1.Failed)
		} else {
			s.PodReplacementPolicy = ptr.To(batchv1.TerminatingOrFailed)
		}
	}
	if s.ManualSelector == nil {
		s.ManualSelector = ptr.To(false)
	}
	defaultPodSpec(&s.Template.Spec)
}

// defaultCronJob is SetDefaults_CronJob: concurrent runs allowed, not
// suspended, 3 successful and 1 failed Job kept; the job template's pod
// template defaulted (not its Job spec).
func defaultCronJob(cj *batchv1.CronJob) {
	s := &cj.Spec
	if s.ConcurrencyPolicy == "" {
		s.ConcurrencyPolicy = batchv1.AllowConcurrent
	}
	if s.Suspend == nil {
		s.Suspend = ptr.To(false)
	}
	if s.SuccessfulJobsHistoryLimit == nil {
		s.SuccessfulJobsHistoryLimit = ptr.To[int32](3)
	}
	if s.FailedJobsHistoryLimit == nil {
		s.FailedJobsHistoryLimit = ptr.To[int32](1)
	}
	defaultPodSpec(&s.JobTemplate.Spec.Template.Spec)
}

// The labels of the job strategy older than batch.kubernetes.io/
// (k8s.io/kubernetes/pkg/apis/batch).
const (
	legacyJobNameLabel       = "job-name"
	legacyControllerUIDLabel = "controller-uid"
)

// generateJobSelector is the job strategy's PrepareForCreate (after the
// field manager): unless the selector is manual, the template is labelled
// with the Job's name and uid and the selector selects the uid.
func generateJobSelector(j *batchv1.Job) {
	if j.Spec.ManualSelector != nil && *j.Spec.ManualSelector {
		return
	}
	t := &j.Spec.Template
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	for k, v := range map[string]string{
		legacyJobNameLabel: j.Name, batchv1.JobNameLabel: j.Name,
		legacyControllerUIDLabel: string(j.UID), batchv1.ControllerUidLabel: string(j.UID),
	} {
		if _, ok := t.Labels[k]; !ok {
			t.Labels[k] = v
		}
	}
	if j.Spec.Selector == nil {
		j.Spec.Selector = &metav1.LabelSelector{}
	}
	if j.Spec.Selector.MatchLabels == nil {
		j.Spec.Selector.MatchLabels = map[string]string{}
	}
	if _, ok := j.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel]; !ok {
		j.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel] = string(j.UID)
	}
}
