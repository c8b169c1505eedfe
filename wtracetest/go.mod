module github.com/wtrace/wtrace/wtracetest

// The standard library only, and a go line below every Kubernetes client
// module's (client-go v0.30 needs Go 1.22, v0.33 Go 1.24.0): adding this
// module to a controller's raises nothing in its go.mod (TestAdoption,
// package testkit/moduletest of the main module, checks it).
go 1.22
