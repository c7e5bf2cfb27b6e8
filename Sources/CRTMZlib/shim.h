// The system zlib, for RTMAuth's AccessToken2 ("007") payloads.
// Debian/Ubuntu: apt-get install zlib1g-dev; macOS: part of the SDK.
#include <zlib.h>
