#define PD_VERSION "0.1.0"
