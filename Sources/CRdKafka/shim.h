// librdkafka's public API and its mock cluster (for tests and the embedded demo).
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

// The oldest librdkafka the code is built and tested with (docs/compatibility.md): Debian 13's.
// 2.0 (Debian 12's) misreads newer brokers' ApiVersions answers and its mock cluster differs.
#if RD_KAFKA_VERSION < 0x020800ff
#error "librdkafka 2.8.0 or later is required, and pkg-config found an older one: run make (it builds Debian 13's 2.8.0 into .build/librdkafka and uses it), or install librdkafka-dev >= 2.8 (Debian 13)"
#endif
