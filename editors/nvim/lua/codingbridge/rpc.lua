-- JSON-RPC 2.0 over one libuv stream pair, LSP framing (Content-Length), the
-- framing Neovim's own LSP client speaks; the server answers in the framing it
-- is spoken to. Everything user-visible runs in vim.schedule: libuv callbacks
-- are "fast events" where most of the API is off limits.
local M = {}

local function encode(msg)
  local body = vim.json.encode(msg)
  return ('Content-Length: %d\r\n\r\n%s'):format(#body, body)
end

-- Cuts complete messages off the front of `buf`; returns them and the rest.
local function split(buf)
  local out = {}
  while true do
    local head_end = buf:find('\r\n\r\n', 1, true)
    if not head_end then break end
    local len = tonumber(buf:sub(1, head_end):match('[Cc]ontent%-[Ll]ength:%s*(%d+)'))
    if not len then error('codingbridge: bad frame header: ' .. buf:sub(1, head_end)) end
    local body_start = head_end + 4
    if #buf < body_start + len - 1 then break end
    table.insert(out, buf:sub(body_start, body_start + len - 1))
    buf = buf:sub(body_start + len)
  end
  return out, buf
end

local Conn = {}
Conn.__index = Conn

-- reader/writer: uv streams (the same pipe for a socket, stdout/stdin of a child).
-- handlers: on_notification(method, params), on_close(reason).
function M.new(reader, writer, handlers)
  local self = setmetatable({
    reader = reader, writer = writer, handlers = handlers,
    next_id = 1, pending = {}, buf = '', closed = false,
  }, Conn)
  reader:read_start(function(err, data)
    if err or not data then
      vim.schedule(function() self:close(err or 'the server closed the connection') end)
      return
    end
    vim.schedule(function() self:_feed(data) end)
  end)
  return self
end

function Conn:_feed(data)
  local ok, bodies, rest = pcall(split, self.buf .. data)
  if not ok then return self:close(bodies) end
  self.buf = rest
  for _, body in ipairs(bodies) do
    local decoded, msg = pcall(vim.json.decode, body)
    if decoded then self:_dispatch(msg) end
  end
end

function Conn:_dispatch(msg)
  if msg.method and msg.id == nil then
    local params = msg.params ~= vim.NIL and msg.params or nil
    if self.handlers.on_notification then self.handlers.on_notification(msg.method, params) end
    return
  end
  local cb = self.pending[msg.id]
  self.pending[msg.id] = nil
  if cb then
    if msg.error then cb(msg.error, nil) else cb(nil, msg.result) end
  end
end

function Conn:_write(msg)
  if self.closed then return false end
  self.writer:write(encode(msg))
  return true
end

-- callback(err, result): err is the JSON-RPC error object, or
-- {message = ...} when the connection is gone.
function Conn:request(method, params, callback)
  local id = self.next_id
  self.next_id = id + 1
  self.pending[id] = callback or function() end
  if not self:_write({ jsonrpc = '2.0', id = id, method = method, params = params }) then
    self.pending[id] = nil
    if callback then callback({ message = 'not connected' }, nil) end
  end
end

function Conn:notify(method, params)
  self:_write({ jsonrpc = '2.0', method = method, params = params })
end

-- Waits (processing events) for a reply; for :checkhealth and shutdown, which
-- must finish before they return.
function Conn:request_sync(method, params, timeout_ms)
  local done, err, result = false, nil, nil
  self:request(method, params, function(e, r) done, err, result = true, e, r end)
  vim.wait(timeout_ms or 2000, function() return done end, 10)
  if not done then return { message = 'no reply within ' .. (timeout_ms or 2000) .. ' ms' }, nil end
  return err, result
end

function Conn:close(reason)
  if self.closed then return end
  self.closed = true
  for _, cb in pairs(self.pending) do cb({ message = 'connection closed' }, nil) end
  self.pending = {}
  for _, h in ipairs({ self.reader, self.writer }) do
    if not h:is_closing() then h:close() end
  end
  if self.handlers.on_close then self.handlers.on_close(reason) end
end

return M
