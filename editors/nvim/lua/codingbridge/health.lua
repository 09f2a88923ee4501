-- :checkhealth codingbridge
local M = {}

-- The reporting API moved: health#report_* (0.7), vim.health.report_* (0.8,
-- 0.9), vim.health.start/ok/... (0.10+, report_* removed in 0.11).
local function reporter()
  local h = vim.health or {}
  if h.start then return h end
  if h.report_start then
    return { start = h.report_start, ok = h.report_ok, warn = h.report_warn, error = h.report_error,
      info = h.report_info }
  end
  local function fn(name) return function(...) vim.fn['health#report_' .. name](...) end end
  return { start = fn('start'), ok = fn('ok'), warn = fn('warn'), error = fn('error'), info = fn('info') }
end

function M.check()
  local h = reporter()
  local cb = require('codingbridge')
  h.start('codingbridge')
  if vim.fn.has('nvim-0.7') == 0 then h.error('Neovim 0.7 or later is needed') end
  local exe = vim.fn.exepath(cb.config.cmd)
  if exe == '' then
    h.error(('%q is not executable; set cmd in setup()'):format(cb.config.cmd))
  else
    h.ok('server binary: ' .. exe)
  end
  local i = cb.info
  if not cb.conn and not i.error then return h.warn('not started: call require("codingbridge").setup()') end
  if i.ready then
    h.ok(('connected (%s) to %s %s; socket %s'):format(i.mode, i.server.name, i.server.version, i.socket))
    local err = cb.conn:request_sync('ping', nil, 2000)
    if err then h.error('ping failed: ' .. (err.message or '?')) else h.ok('ping answered') end
  else
    h.error('not connected: ' .. (i.error or 'connecting'))
  end
  if i.stderr ~= '' then h.info('server log (end): ' .. i.stderr) end
end

return M
