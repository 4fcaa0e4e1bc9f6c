// coc._timing: the timing kernel of `coc bench` — a calibrated clock and a spin until an
// agreed global time, in C++ so that the start of a trial carries no interpreter jitter.
//
// Local time is CLOCK_MONOTONIC_RAW (not slewed by NTP; CLOCK_MONOTONIC where RAW is
// missing). A Clock maps it to the job's global time, that of rank 0:
//     global = local + offset_ns + drift * (local - ref_ns)
// coc.bench.clock computes offset and drift; this module only applies them.
//
// Test hook: set_skew(offset_ns, ppm) distorts this process's *local* clock, so tests can
// give processes on one host known clock differences and check calibration removes them.

#include <pybind11/pybind11.h>

#include <cerrno>
#include <cstdint>
#include <ctime>

#include <sched.h>

namespace py = pybind11;

namespace {

#ifdef CLOCK_MONOTONIC_RAW
constexpr clockid_t kLocalClock = CLOCK_MONOTONIC_RAW;
constexpr const char *kLocalClockName = "CLOCK_MONOTONIC_RAW";
#else
constexpr clockid_t kLocalClock = CLOCK_MONOTONIC;
constexpr const char *kLocalClockName = "CLOCK_MONOTONIC";
#endif

// The injected distortion (test hook); zero in real runs.
int64_t skew_offset_ns = 0;
double skew_ppm = 0.0;
int64_t skew_origin_ns = 0;  // the rate error accumulates from here (when it was set)

int64_t os_ns() {
    timespec ts;
    clock_gettime(kLocalClock, &ts);
    return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int64_t local_ns() {
    int64_t t = os_ns();
    return t + skew_offset_ns + int64_t(double(t - skew_origin_ns) * skew_ppm * 1e-6);
}

// Sleep (not spin) for ns nanoseconds of the OS clock, restarting after signals.
void sleep_ns(int64_t ns) {
    timespec ts{time_t(ns / 1000000000), long(ns % 1000000000)};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

class Clock {
  public:
    Clock(int64_t offset_ns, double drift, int64_t ref_ns)
        : offset_ns_(offset_ns), drift_(drift), ref_ns_(ref_ns) {}

    int64_t to_global(int64_t local) const {
        return local + offset_ns_ + int64_t(drift_ * double(local - ref_ns_));
    }

    int64_t now() const { return to_global(local_ns()); }

    // Wait until global time `target`: sleep while more than `sleep_margin_ns` remain (on an
    // oversubscribed host a spinning rank steals the core of the ranks that work), then spin.
    // With `yield`, the spin calls sched_yield(). Returns (global time on return, whether
    // `target` had already passed on entry).
    py::tuple spin_until(int64_t target, int64_t sleep_margin_ns, bool yield) const {
        int64_t now_g = now();
        bool late = now_g >= target;
        {
            py::gil_scoped_release nogil;
            if (!late) {
                int64_t left = target - now_g;
                if (left > sleep_margin_ns) {
                    sleep_ns(left - sleep_margin_ns);
                }
                // Yield while spinning: where ranks outnumber cores, the rank holding a
                // core lets the others reach the start too (costs ~0.3 us when idle).
                while ((now_g = now()) < target) {
                    if (yield) {
                        sched_yield();
                    }
                }
            }
        }
        return py::make_tuple(now_g, late);
    }

    int64_t offset_ns() const { return offset_ns_; }
    double drift() const { return drift_; }
    int64_t ref_ns() const { return ref_ns_; }

  private:
    int64_t offset_ns_;
    double drift_;
    int64_t ref_ns_;
};

}  // namespace

PYBIND11_MODULE(_timing, m) {
    m.doc() = "Calibrated global clock and spin-until for coc bench (see coc.bench.clock).";
    m.attr("LOCAL_CLOCK") = kLocalClockName;

    m.def("local_ns", &local_ns,
          "Return this process's local clock in nanoseconds (with any injected skew).");
    m.def("set_skew", [](int64_t offset_ns, double ppm) {
              skew_offset_ns = offset_ns;
              skew_ppm = ppm;
              skew_origin_ns = os_ns();
          },
          py::arg("offset_ns"), py::arg("ppm") = 0.0,
          "Distort the local clock from now on by an offset and a rate error (a test hook).");
    m.def("resolution_ns", []() {
              timespec ts;
              clock_getres(kLocalClock, &ts);
              return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
          },
          "Return the resolution the OS reports for the local clock, in nanoseconds.");
    m.def("read_cost_ns", [](int reads) {
              int64_t t0 = os_ns();
              for (int i = 0; i < reads; ++i) {
                  local_ns();
              }
              return double(os_ns() - t0) / reads;
          },
          py::arg("reads") = 100000, "Return the mean cost of one clock read, in nanoseconds.");

    py::class_<Clock>(m, "Clock", "Local clock mapped to the job's global time by offset and drift.")
        .def(py::init<int64_t, double, int64_t>(), py::arg("offset_ns") = 0,
             py::arg("drift") = 0.0, py::arg("ref_ns") = 0)
        .def("now", &Clock::now, "Return the global time in nanoseconds.")
        .def("to_global", &Clock::to_global, py::arg("local_ns"),
             "Return the global time of a local clock reading.")
        .def("spin_until", &Clock::spin_until, py::arg("target_ns"),
             py::arg("sleep_margin_ns") = 200000, py::arg("yield_cpu") = false,
             "Wait (GIL released) until global time target_ns; return (now, was_late).")
        .def_property_readonly("offset_ns", &Clock::offset_ns)
        .def_property_readonly("drift", &Clock::drift)
        .def_property_readonly("ref_ns", &Clock::ref_ns);
}
