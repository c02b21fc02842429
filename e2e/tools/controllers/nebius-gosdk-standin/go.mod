module github.com/nebius/gosdk

go 1.26
