#include "dist/guarded_run.h"

#include <c10/util/Exception.h>

#include "core/error.h"
#include "dist/job_error.h"

namespace megaton::dist {
namespace {

[[noreturn]] void fail(const char* kind, const char* what, ExitCode code) {
  end_job_with_error(RankError{0, static_cast<int>(code), kind, what}, code == ExitCode::kUsage);
}

}  // namespace

int guarded_run(const std::function<int()>& body) {
  try {
    return body();
  } catch (const Error& e) {
    fail(e.kind(), e.what(), e.code());
  } catch (const c10::Error& e) {
    fail("torch error", e.what_without_backtrace(), ExitCode::kRuntime);
  } catch (const std::bad_alloc&) {
    fail("runtime error", "out of memory", ExitCode::kRuntime);
  } catch (const std::exception& e) {
    fail("internal error", e.what(), ExitCode::kInternal);
  }
}

}  // namespace megaton::dist
