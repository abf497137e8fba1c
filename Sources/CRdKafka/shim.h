// librdkafka's public API and its mock cluster (for tests and the embedded demo).
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
