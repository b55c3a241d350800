#include <postgresql/libpq-fe.h>
