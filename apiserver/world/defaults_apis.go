package world

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The defaults kube-apiserver v1.33's decoder sets in the kinds of the
// smaller groups (k8s.io/kubernetes/pkg/apis/<group>/<version>/defaults.go
// and zz_generated.defaults.go): admissionregistration.k8s.io/v1,
// autoscaling, discovery.k8s.io/v1, flowcontrol.apiserver.k8s.io/v1,
// networking.k8s.io/v1, scheduling.k8s.io/v1.

// defaultWebhook is SetDefaults_ValidatingWebhook (and, with the
// reinvocation policy, SetDefaults_MutatingWebhook), with its rules' and
// service's defaults.
func defaultWebhook(failure **admissionregistrationv1.FailurePolicyType, match **admissionregistrationv1.MatchPolicyType,
	ns, obj **metav1.LabelSelector, timeout **int32, cc *admissionregistrationv1.WebhookClientConfig,
	rules []admissionregistrationv1.RuleWithOperations) {
	if *failure == nil {
		*failure = ptr.To(admissionregistrationv1.Fail)
	}
	if *match == nil {
		*match = ptr.To(admissionregistrationv1.Equivalent)
	}
	if *ns == nil {
		*ns = &metav1.LabelSelector{}
	}
	if *obj == nil {
		*obj = &metav1.LabelSelector{}
	}
	if *timeout == nil {
		*timeout = ptr.To[int32](10)
	}
	if cc.Service != nil && cc.Service.Port == nil {
		cc.Service.Port = ptr.To[int32](443)
	}
	defaultRules(rules)
}

// defaultRules is SetDefaults_Rule: every scope.
func defaultRules(rules []admissionregistrationv1.RuleWithOperations) {
	for i := range rules {
		if rules[i].Scope == nil {
			rules[i].Scope = ptr.To(admissionregistrationv1.AllScopes)
		}
	}
}

func defaultValidatingWebhooks(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
	for i := range c.Webhooks {
		w := &c.Webhooks[i]
		defaultWebhook(&w.FailurePolicy, &w.MatchPolicy, &w.NamespaceSelector, &w.ObjectSelector, &w.TimeoutSeconds, &w.ClientConfig, w.Rules)
	}
}

func defaultMutatingWebhooks(c *admissionregistrationv1.MutatingWebhookConfiguration) {
	for i := range c.Webhooks {
		w := &c.Webhooks[i]
		defaultWebhook(&w.FailurePolicy, &w.MatchPolicy, &w.NamespaceSelector, &w.ObjectSelector, &w.TimeoutSeconds, &w.ClientConfig, w.Rules)
		if w.ReinvocationPolicy == nil {
			w.ReinvocationPolicy = ptr.To(admissionregistrationv1.NeverReinvocationPolicy)
		}
	}
}

// defaultMatchResources is SetDefaults_MatchResources and its rules'.
func defaultMatchResources(m *admissionregistrationv1.MatchResources) {
	if m == nil {
		return
	}
	if m.MatchPolicy == nil {
		m.MatchPolicy = ptr.To(admissionregistrationv1.Equivalent)
	}
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
	for _, rs := range [][]admissionregistrationv1.NamedRuleWithOperations{m.ResourceRules, m.ExcludeResourceRules} {
		for i := range rs {
			if rs[i].Scope == nil {
				rs[i].Scope = ptr.To(admissionregistrationv1.AllScopes)
			}
		}
	}
}

// defaultValidatingAdmissionPolicy is SetDefaults_ValidatingAdmissionPolicySpec
// (failure policy Fail) and its match constraints'.
func defaultValidatingAdmissionPolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
	if p.Spec.FailurePolicy == nil {
		p.Spec.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
	}
	defaultMatchResources(p.Spec.MatchConstraints)
}

// defaultHPA is SetDefaults_HorizontalPodAutoscaler (autoscaling/v2): one
// replica at least, 80% of CPU when no metric is named, and a behavior's
// unset rules the controller's.
func defaultHPA(h *autoscalingv2.HorizontalPodAutoscaler) {
	if h.Spec.MinReplicas == nil {
		h.Spec.MinReplicas = ptr.To[int32](1)
	}
	if len(h.Spec.Metrics) == 0 {
		h.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)}}}}
	}
	if b := h.Spec.Behavior; b != nil {
		maxPolicy := autoscalingv2.MaxChangePolicySelect
		up := &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0), SelectPolicy: &maxPolicy,
			Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
				{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}}}
		down := &autoscalingv2.HPAScalingRules{SelectPolicy: ptr.To(maxPolicy),
			Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}}}
		b.ScaleUp = scalingRules(b.ScaleUp, up)
		b.ScaleDown = scalingRules(b.ScaleDown, down)
	}
}

// scalingRules is copyHPAScalingRules: the rules set in from over the
// defaults to.
func scalingRules(from, to *autoscalingv2.HPAScalingRules) *autoscalingv2.HPAScalingRules {
	if from == nil {
		return to
	}
	if from.SelectPolicy != nil {
		to.SelectPolicy = from.SelectPolicy
	}
	if from.StabilizationWindowSeconds != nil {
		to.StabilizationWindowSeconds = from.StabilizationWindowSeconds
	}
	if from.Policies != nil {
		to.Policies = from.Policies
	}
	if from.Tolerance != nil {
		to.Tolerance = from.Tolerance
	}
	return to
}

// defaultHPAv1 is SetDefaults_HorizontalPodAutoscaler (autoscaling/v1).
func defaultHPAv1(h *autoscalingv1.HorizontalPodAutoscaler) {
	if h.Spec.MinReplicas == nil {
		h.Spec.MinReplicas = ptr.To[int32](1)
	}
}

// defaultEndpointSlice is SetDefaults_EndpointPort: a port's name is "",
// its protocol TCP.
func defaultEndpointSlice(es *discoveryv1.EndpointSlice) {
	for i := range es.Ports {
		p := &es.Ports[i]
		if p.Name == nil {
			p.Name = ptr.To("")
		}
		if p.Protocol == nil {
			p.Protocol = ptr.To(corev1.ProtocolTCP)
		}
	}
}

// defaultNetworkPolicy is SetDefaults_NetworkPolicy (an Ingress policy, and
// Egress when it has egress rules) and SetDefaults_NetworkPolicyPort (TCP).
func defaultNetworkPolicy(np *networkingv1.NetworkPolicy) {
	s := &np.Spec
	if len(s.PolicyTypes) == 0 {
		s.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		if len(s.Egress) != 0 {
			s.PolicyTypes = append(s.PolicyTypes, networkingv1.PolicyTypeEgress)
		}
	}
	ports := func(ps []networkingv1.NetworkPolicyPort) {
		for i := range ps {
			if ps[i].Protocol == nil {
				ps[i].Protocol = ptr.To(corev1.ProtocolTCP)
			}
		}
	}
	for i := range s.Ingress {
		ports(s.Ingress[i].Ports)
	}
	for i := range s.Egress {
		ports(s.Egress[i].Ports)
	}
}

// defaultIngressClass is SetDefaults_IngressClass: parameters are
// cluster-scoped unless said otherwise.
func defaultIngressClass(ic *networkingv1.IngressClass) {
	if p := ic.Spec.Parameters; p != nil && p.Scope == nil {
		p.Scope = ptr.To(networkingv1.IngressClassParametersReferenceScopeCluster)
	}
}

// defaultPriorityClass is SetDefaults_PriorityClass.
func defaultPriorityClass(pc *schedulingv1.PriorityClass) {
	if pc.PreemptionPolicy == nil {
		pc.PreemptionPolicy = ptr.To(corev1.PreemptLowerPriority)
	}
}

// defaultFlowSchema is SetDefaults_FlowSchemaSpec.
func defaultFlowSchema(fs *flowcontrolv1.FlowSchema) {
	if fs.Spec.MatchingPrecedence == 0 {
		fs.Spec.MatchingPrecedence = 1000
	}
}

// defaultPriorityLevel is the defaults of a PriorityLevelConfiguration's
// limited (30 shares, none lent, 64 queues of 50 dealt hands of 8) or
// exempt (none) configuration.
func defaultPriorityLevel(pl *flowcontrolv1.PriorityLevelConfiguration) {
	if l := pl.Spec.Limited; l != nil {
		if l.NominalConcurrencyShares == nil {
			l.NominalConcurrencyShares = ptr.To[int32](30)
		}
		if l.LendablePercent == nil {
			l.LendablePercent = ptr.To[int32](0)
		}
		if q := l.LimitResponse.Queuing; q != nil {
			if q.HandSize == 0 {
				q.HandSize = 8
			}
			if q.Queues == 0 {
				q.Queues = 64
			}
			if q.QueueLengthLimit == 0 {
				q.QueueLengthLimit = 50
			}
		}
	}
	if e := pl.Spec.Exempt; e != nil {
		if e.NominalConcurrencyShares == nil {
			e.NominalConcurrencyShares = ptr.To[int32](0)
		}
		if e.LendablePercent == nil {
			e.LendablePercent = ptr.To[int32](0)
		}
	}
}
