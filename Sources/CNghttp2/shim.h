// libnghttp2's client session API.
#include <nghttp2/nghttp2.h>
