module github.com/do-now/function-karpenter/tools/k8sschemas

go 1.26.8
