// librdkafka's public API and its mock cluster (for tests and the embedded demo).
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

// The oldest librdkafka the code is built and tested with (docs/compatibility.md): Debian forky's
// 2.14.2. Before it: the next-generation group protocol was not generally available (2.12), member
// ids were not drawn from a secure generator (2.13), and closing a consumer with no coordinator
// could crash (2.14.2). 2.0 (Debian 12's) misreads newer brokers' ApiVersions answers.
#if RD_KAFKA_VERSION < 0x020e02ff
#error "librdkafka 2.14.2 or later is required, and pkg-config found an older one: run make (it builds Debian forky's 2.14.2 into .build/librdkafka and uses it), or install librdkafka-dev >= 2.14.2"
#endif
