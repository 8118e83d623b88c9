package resources_test

import (
	"errors"
	"fmt"

	"github.com/brimnode/brim/resources"
)

func ExampleParse() {
	r, err := resources.Parse("mem:1024; cpus:2; ports:[31000-31010]; cpus(hdfs):1; cpus{REV}:0.5")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r)
	fmt.Println(r.CPUs(), r.Mem())

	_, err = resources.Parse("cpus:1;mem:lots")
	fmt.Println(err)
	// Output:
	// cpus:2;cpus{REV}:0.5;cpus(hdfs):1;mem:1024;ports:[31000-31010]
	// 3.5 1024
	// resource "mem:lots": invalid scalar "lots"
}

func ExampleResources_Subtract() {
	agent := resources.MustParse("cpus:4;mem:8192;ports:[31000-31010]")
	task := resources.MustParse("cpus:0.1;mem:512;ports:[31005]")
	if agent.Contains(task) {
		agent = agent.Subtract(task)
	}
	fmt.Println(agent)
	// Output: cpus:3.9;mem:7680;ports:[31000-31004,31006-31010]
}

func ExampleResources_Reserve() {
	r, err := resources.MustParse("cpus:2;mem:1024").Reserve("hdfs", "alice")
	fmt.Println(r, err)
	fmt.Println(r.Unreserve())

	_, err = resources.MustParse("cpus{REV}:1").Reserve("hdfs", "alice")
	fmt.Println(errors.Is(err, resources.ErrRevocableReservation))
	// Output:
	// cpus(hdfs,alice):2;mem(hdfs,alice):1024 <nil>
	// cpus:2;mem:1024
	// true
}

func ExampleValidateTask() {
	err := resources.ValidateTask(resources.MustParse("cpus:1;cpus{REV}:1;mem:128"))
	fmt.Println(errors.Is(err, resources.ErrMixedRevocable))
	fmt.Println(err)
	// Output:
	// true
	// resource "cpus{REV}:1": mixes revocable and non-revocable "cpus"
}
