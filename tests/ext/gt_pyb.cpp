// SPDX-License-Identifier: MIT
// Test helper (built by tests/test_tracer_robustness.py when pybind11 is installed):
// pybind11 functions, including ones made and freed at run time.
#include <pybind11/pybind11.h>

#include <string>

namespace py = pybind11;

PYBIND11_MODULE(gt_pyb, m)
{
    m.def("add", [](int a, int b) { return a + b; });
    m.def("make", [](const std::string &name) {
        return py::cpp_function([]() { return 1; }, py::name(name.c_str()));
    });
}
