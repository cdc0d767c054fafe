// A raster picture for omnishard plot's PNG charts (cli/plot_images.h): a canvas of palette colours with lines,
// discs, rectangles and text in a built-in 6x11 bitmap font, written as a PNG file (8-bit palette, zlib's deflate,
// a CRC-32 per chunk: the PNG specification's format, which every viewer and Pillow read).
#pragma once
#include <stdint.h>

// the palette (os_canvas_write_png writes it as PLTE in this order)
enum { OS_PX_WHITE, OS_PX_FRAME, OS_PX_GRID, OS_PX_RAW, OS_PX_SMOOTH, OS_PX_EVAL, OS_PX_TEXT, OS_PX_NCOLORS };
extern const uint8_t os_px_rgb[OS_PX_NCOLORS][3];

typedef struct {
    int W, H;
    uint8_t *px;   // [H][W] palette indices
} os_canvas;

void os_canvas_init(os_canvas *c, int W, int H);   // all OS_PX_WHITE
void os_canvas_free(os_canvas *c);
// a segment of the given width (pixels) between two points (pixel coordinates, y down), clipped to the canvas
void os_canvas_line(os_canvas *c, double x0, double y0, double x1, double y1, double width, int color);
void os_canvas_disc(os_canvas *c, double x, double y, double r, int color);
void os_canvas_box(os_canvas *c, double x, double y, double w, double h, int color);   // the outline
// text whose baseline is at y; align -1: starts at x, 0: centred on x, 1: ends at x
void os_canvas_text(os_canvas *c, double x, double y, const char *s, int align, int color);
// the PNG file, written atomically; 0, or -1 + message naming path
int os_canvas_write_png(const os_canvas *c, const char *path);
